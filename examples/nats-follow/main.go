// Command nats-follow starts a turn with POST /async and prints its output as it reads it from
// NATS JetStream, where the harness publishes every turn when NATS_URL is set (make dev runs a
// NATS server and sets it).
//
// With `make dev` running, in a second shell from the repository root:
//
//	source .dev.env
//	go run ./examples/nats-follow
//	go run ./examples/nats-follow -agent approver -message "Run the nightly build"
//
// It makes a user key pair, asks the harness to sign credentials for its public key (POST
// /accounts/me/nats-credentials: a short-lived user JWT that may read this account's turns and
// nothing else; the private key never leaves this process), starts the turn, connects to the
// first server the answer names, and reads the turn's subject with an ordered consumer from its
// start, named with the consumer names the credentials hold (the server refuses any other): a
// turn that ended before the consumer was made is replayed whole. It prints text as it
// comes, tool calls and their results on lines of their own, and how each part of the turn
// ended; it exits 0 when the turn completes, 1 when it fails or the wait times out. A turn that
// waits for approval is followed until -timeout: decide it with POST /async (see docs/api.md).
//
// Flags override the environment: -url (HARNESS_URL), -secret (HARNESS_SECRET), -agent,
// -message, -timeout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentharness/harness/examples/internal/harnessapi"
)

type config struct {
	HarnessURL, Secret, Agent, Message string
	Timeout                            time.Duration
}

func main() {
	var cfg config
	harnessapi.Endpoint(&cfg.HarnessURL, &cfg.Secret)
	flag.StringVar(&cfg.Agent, "agent", "demo", "agent to run")
	flag.StringVar(&cfg.Message, "message", "What time is it?", "the user's message")
	flag.DurationVar(&cfg.Timeout, "timeout", time.Minute, "how long to follow the turn")
	flag.Parse()
	harnessapi.Main("nats-follow", func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

// credentials is the answer of POST /accounts/me/nats-credentials.
type credentials struct {
	JWT            string   `json:"jwt"`
	Stream         string   `json:"stream"`
	InboxPrefix    string   `json:"inboxPrefix"`
	APIPrefix      string   `json:"apiPrefix"`
	ConsumerPrefix string   `json:"consumerPrefix"`
	Servers        []string `json:"servers"`
}

// message is a turn's entry on NATS.
type message struct {
	Seq     int64            `json:"seq"`
	Chunks  []map[string]any `json:"chunks"`
	Outcome *struct {
		Status string `json:"status"`
		Final  bool   `json:"final"`
		Error  string `json:"error"`
	} `json:"outcome"`
}

func run(ctx context.Context, cfg config, stdout io.Writer) error {
	if cfg.HarnessURL == "" || cfg.Secret == "" {
		return errors.New("set HARNESS_URL and HARNESS_SECRET (source .dev.env) or pass -url and -secret")
	}
	base := strings.TrimRight(cfg.HarnessURL, "/")
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	user, err := nkeys.CreateUser()
	if err != nil {
		return err
	}
	pub, err := user.PublicKey()
	if err != nil {
		return err
	}
	var creds credentials
	if err := call(ctx, base+"/accounts/me/nats-credentials", cfg.Secret, map[string]string{"publicKey": pub}, &creds); err != nil {
		return err
	}
	if len(creds.Servers) == 0 {
		return errors.New("the harness named no NATS server to connect to")
	}
	var turn struct {
		EventID        string `json:"eventId"`
		ConversationID string `json:"conversationId"`
		Subject        string `json:"natsSubject"`
	}
	if err := call(ctx, base+"/async", cfg.Secret, map[string]string{"agentId": cfg.Agent, "message": cfg.Message}, &turn); err != nil {
		return err
	}
	if turn.Subject == "" {
		return errors.New("POST /async answered without a natsSubject: the harness publishes no turns to NATS (NATS_URL)")
	}
	fmt.Fprintf(stdout, "turn %s of conversation %s, following %s on stream %s at %s\n\n", turn.EventID, turn.ConversationID, turn.Subject, creds.Stream, creds.Servers[0])

	nc, err := nats.Connect(creds.Servers[0],
		nats.UserJWT(func() (string, error) { return creds.JWT, nil }, user.Sign),
		nats.CustomInboxPrefix(creds.InboxPrefix), nats.Name("nats-follow"))
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", creds.Servers[0], err)
	}
	defer nc.Close()
	js, err := jetstream.NewWithAPIPrefix(nc, creds.APIPrefix)
	if err != nil {
		return err
	}
	// The ordered consumer names its consumers <prefix>_1, then _2 at a reset, and so on: the
	// names the credentials hold.
	consumer, err := js.OrderedConsumer(ctx, creds.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{turn.Subject}, NamePrefix: creds.ConsumerPrefix})
	if err != nil {
		return fmt.Errorf("reading %s: %w", turn.Subject, err)
	}
	msgs, err := consumer.Messages()
	if err != nil {
		return err
	}
	stopped := context.AfterFunc(ctx, msgs.Stop)
	defer stopped()
	for {
		msg, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("the turn did not end within %s", cfg.Timeout)
			}
			return err
		}
		var m message
		if err := json.Unmarshal(msg.Data(), &m); err != nil {
			return fmt.Errorf("entry on %s is not a turn message: %w", msg.Subject(), err)
		}
		for _, c := range m.Chunks {
			show(stdout, c)
		}
		if o := m.Outcome; o != nil {
			fmt.Fprintf(stdout, "\n[%s]\n", o.Status)
			switch {
			case !o.Final:
				continue // it goes on later, on the same subject
			case o.Status != "completed":
				return fmt.Errorf("the turn ended %s: %s", o.Status, o.Error)
			}
			return nil
		}
	}
}

// show prints one UI message chunk: text as it comes, tool calls and results on lines of their
// own.
func show(w io.Writer, c map[string]any) {
	str := func(k string) string { s, _ := c[k].(string); return s }
	js := func(k string) string { b, _ := json.Marshal(c[k]); return string(b) }
	switch str("type") {
	case "text-delta":
		fmt.Fprint(w, str("delta"))
	case "tool-input-available":
		fmt.Fprintf(w, "\n[call %s %s]\n", str("toolName"), js("input"))
	case "tool-output-available":
		fmt.Fprintf(w, "[result %s]\n", js("output"))
	case "tool-output-error":
		fmt.Fprintf(w, "[error %s]\n", str("errorText"))
	case "tool-approval-request":
		fmt.Fprintf(w, "[waiting for approval %s]\n", str("approvalId"))
	case "error":
		fmt.Fprintf(w, "\n[error %s]\n", str("errorText"))
	}
}

// call POSTs in as JSON with the account secret and decodes a 2xx answer into out.
func call(ctx context.Context, url, secret string, in, out any) error {
	code, body, err := harnessapi.Call(ctx, http.MethodPost, url, secret, in, out)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("POST %s = %d %s", url, code, body)
	}
	return nil
}
