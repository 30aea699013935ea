// Package natsturns names the NATS subjects the harness publishes turns on and issues the
// short-lived user credentials with which an account's clients read them: a user JWT that may
// read the account's own subjects through JetStream consumers whose names it holds, and nothing
// else.
//
// It imports no NATS client or server: account-manage, which issues the credentials, stays light.
package natsturns

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// DefaultStream is the JetStream stream turns are published to when NATS_STREAM is unset.
const DefaultStream = "HARNESS_TURNS"

// Token is id as one subject token. Ids hold only letters, digits and "_-.:", so only '.',
// which separates tokens, needs escaping; '%' is not an id character, so "%2E" cannot be
// mistaken for anything an id holds.
func Token(id string) string { return strings.ReplaceAll(id, ".", "%2E") }

// Subject is the subject a turn's stream is published on.
func Subject(accountID, conversationID, turnKey string) string {
	return "harness." + Token(accountID) + "." + Token(conversationID) + "." + Token(turnKey)
}

// AccountSubjects matches every turn of an account.
func AccountSubjects(accountID string) string { return "harness." + Token(accountID) + ".>" }

// ConversationSubjects matches every turn of a conversation.
func ConversationSubjects(accountID, conversationID string) string {
	return "harness." + Token(accountID) + "." + Token(conversationID) + ".>"
}

// InboxPrefix is the inbox prefix a client of the account must connect with (nats.go's
// CustomInboxPrefix, nats.js's inboxPrefix). The replies to its pull requests carry the messages
// it reads, so its inboxes must be its own: with the default "_INBOX" every client could
// subscribe to "_INBOX.>" and read every other client's messages.
func InboxPrefix(accountID string) string { return "_INBOX_" + Token(accountID) }

// APIPrefix is the JetStream API prefix of clients (nats.go's jetstream.NewWithAPIPrefix,
// nats.js's jetstream(nc, {apiPrefix})): in the clients' account, the stream account's API is
// imported under it, since the server answers $JS.API itself in an account without JetStream.
const APIPrefix = "JS.harness.API"

// API is a JetStream API subject clients read the stream with: Subject in the stream's
// account, Local where the clients' account imports it. Stream says its answer is a stream of
// messages (a pull request's), not one.
type API struct {
	Subject, Local string
	Stream         bool
}

// ConsumerAPI are the JetStream API subjects the clients of every account read stream with:
// what the stream's NATS account exports as services and the clients' account imports
// (docs/deploying.md#nats), and what ClientPermissions narrows to one credential's consumers.
func ConsumerAPI(stream string) []API {
	var out []API
	for _, a := range []API{{Subject: "CREATE." + stream + ".>"}, {Subject: "MSG.NEXT." + stream + ".*", Stream: true}, {Subject: "INFO." + stream + ".*"}, {Subject: "DELETE." + stream + ".*"}} {
		out = append(out, API{Subject: "$JS.API.CONSUMER." + a.Subject, Local: APIPrefix + ".CONSUMER." + a.Subject, Stream: a.Stream})
	}
	return out
}

// Consumers is how many consumer names a credential holds.
const Consumers = 4

// ConsumerInactive is how long a client's consumer outlives its last pull: the stream the
// harness makes gives it to a consumer that sets none and refuses a longer one, so consumers of
// credentials that expired go within it. (nats.go's ordered consumers ask for exactly this.)
const ConsumerInactive = 5 * time.Minute

// ConsumerPrefix is what the consumer names of a client of accountID with the user key userKey
// begin with (ConsumerNames): a digest of both, so no credential of another account or key
// holds them, and the same in every credential of that key, so a client that renews its
// credentials keeps its consumers. Ids hold no NUL, so the two cannot run into each other.
func ConsumerPrefix(accountID, userKey string) string {
	sum := sha256.Sum256([]byte(accountID + "\x00" + userKey))
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:10])
}

// ConsumerNames are the Consumers names prefix_1, prefix_2, …: the names nats.go's ordered
// consumer gives its consumers with OrderedConsumerConfig.NamePrefix, one more at each reset.
func ConsumerNames(prefix string) []string {
	names := make([]string, Consumers)
	for i := range names {
		names[i] = prefix + "_" + strconv.Itoa(i+1)
	}
	return names
}

// ClientPermissions lets a client of the account read its own turns from stream through the
// consumers named consumers, and nothing else. The client connects in the clients' NATS
// account, which imports ConsumerAPI from the stream's: a client can have the server answer a
// request on any subject (permissions cover where it publishes, not the reply subject it names),
// and in the stream's account such an answer could land on another account's turn subject and
// be kept there.
//
// Every consumer API subject names its consumer in one token
// ($JS.API.CONSUMER.MSG.NEXT.<stream>.<name>), and a permission matches a token whole or not at
// all, so each name is granted exactly: every consumer lives in the one stream, and a client may
// create, pull from, read and delete only its own, never another credential's, whatever that
// one is named. It may create them only through the API subject that carries the filter
// ($JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>): the server refuses a request whose
// filter_subject differs from the subject's filter, or which sets filter_subjects, so every
// consumer it creates, or re-creates over its own name, reads its own subjects. No client may
// list consumers (CONSUMER.LIST, CONSUMER.NAMES). STREAM.INFO is not allowed: its
// subjects_filter would list other accounts' conversations. (nats.js's ordered consumer asks
// for it first, so JS clients make a consumer of their own instead.) It subscribes only to its
// own inboxes, where the messages it pulls come.
func ClientPermissions(stream, accountID string, consumers []string) jwt.Permissions {
	var pub jwt.StringList
	for _, name := range consumers {
		for _, api := range ConsumerAPI(stream) {
			// Local ends in the wildcard that stands for the name, ">" where the filter follows it.
			subject := api.Local[:len(api.Local)-1] + name
			if strings.HasSuffix(api.Local, ">") {
				subject += "." + AccountSubjects(accountID)
			}
			pub = append(pub, subject)
		}
	}
	return jwt.Permissions{
		Pub: jwt.Permission{Allow: pub},
		Sub: jwt.Permission{Allow: jwt.StringList{InboxPrefix(accountID) + ".>"}},
	}
}

// Issuer signs user credentials for accounts' clients with a signing key of the NATS account
// the harness publishes in.
type Issuer struct {
	// Now is the clock credentials expire by; nil is time.Now.
	Now func() time.Time

	signer nkeys.KeyPair
	// issuerAccount is the account's public key when signer is a signing key, not its identity.
	issuerAccount string
	stream        string
	ttl           time.Duration
	servers       []string
}

// NewIssuer returns an Issuer signing with signingSeed, an account seed ("SA…"). accountPublicKey
// ("A…") is the account's identity key, empty when signingSeed is that key itself. stream ""
// is DefaultStream; credentials expire ttl after they are issued; servers are the URLs clients
// connect to, echoed in every answer.
func NewIssuer(signingSeed, accountPublicKey, stream string, ttl time.Duration, servers []string) (*Issuer, error) {
	kp, err := nkeys.FromSeed([]byte(strings.TrimSpace(signingSeed)))
	if err != nil {
		return nil, errors.New("the NATS signing seed is not an nkey seed")
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, errors.New("the NATS signing seed is not an account seed (one starts with SA)")
	}
	if accountPublicKey == "" {
		accountPublicKey = pub
	}
	if !nkeys.IsValidPublicAccountKey(accountPublicKey) {
		return nil, fmt.Errorf("the NATS account %q is not an account public key (one starts with A)", accountPublicKey)
	}
	if stream == "" {
		stream = DefaultStream
	}
	if strings.ContainsAny(stream, ".*> \t\r\n") {
		return nil, fmt.Errorf("the stream name %q holds a character stream names cannot", stream)
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("the credentials' lifetime is %s; it must be positive", ttl)
	}
	i := &Issuer{signer: kp, stream: stream, ttl: ttl, servers: servers}
	if pub != accountPublicKey {
		i.issuerAccount = accountPublicKey
	}
	return i, nil
}

// Credentials are what a client of an account connects with: a user JWT, and its seed when the
// harness made the key pair.
type Credentials struct {
	JWT string `json:"jwt"`
	// Seed and Creds (the JWT and seed as a creds file) are set only when the harness generated
	// the key pair.
	Seed        string    `json:"seed,omitempty"`
	Creds       string    `json:"creds,omitempty"`
	ExpiresAt   time.Time `json:"expiresAt"`
	Stream      string    `json:"stream"`
	Subjects    string    `json:"subjects"`
	InboxPrefix string    `json:"inboxPrefix"`
	// APIPrefix is the JetStream API prefix to read with (APIPrefix).
	APIPrefix string `json:"apiPrefix"`
	// ConsumerPrefix and Consumers (ConsumerNames) are the consumers the credentials may use.
	ConsumerPrefix string   `json:"consumerPrefix"`
	Consumers      []string `json:"consumers"`
	Servers        []string `json:"servers,omitempty"`
}

// maxJWT is the longest user JWT issued: a server refuses a CONNECT longer than its
// max_control_line (4096 bytes unless configured), and the rest of a CONNECT takes a few
// hundred.
const maxJWT = 3584

// BadKeyError refuses a user public key the client sent.
type BadKeyError struct{ Problem string }

func (e *BadKeyError) Error() string { return e.Problem }

// Issue returns credentials for a client of accountID. With userPublicKey "" the harness makes
// the key pair and returns its seed; otherwise userPublicKey ("U…") is the client's, whose seed
// never leaves it, and a key that is not a user public key is a *BadKeyError.
func (i *Issuer) Issue(accountID, userPublicKey string) (Credentials, error) {
	if accountID == "" {
		return Credentials{}, errors.New("issuing NATS credentials: no account id")
	}
	var seed []byte
	if userPublicKey == "" {
		kp, err := nkeys.CreateUser()
		if err == nil {
			seed, err = kp.Seed()
		}
		if err == nil {
			userPublicKey, err = kp.PublicKey()
		}
		if err != nil {
			return Credentials{}, fmt.Errorf("making a NATS user key: %w", err)
		}
	} else if err := checkUserKey(userPublicKey); err != nil {
		return Credentials{}, err
	}
	now := time.Now
	if i.Now != nil {
		now = i.Now
	}
	// JWTs carry whole seconds: the expiry is rounded down so the answer tells it exactly.
	expires := time.Unix(now().Add(i.ttl).Unix(), 0).UTC()
	claims := jwt.NewUserClaims(userPublicKey)
	claims.Name = accountID
	claims.Expires = expires.Unix()
	claims.IssuerAccount = i.issuerAccount
	prefix := ConsumerPrefix(accountID, userPublicKey)
	consumers := ConsumerNames(prefix)
	claims.Permissions = ClientPermissions(i.stream, accountID, consumers)
	claims.BearerToken = false
	// Clients read over TCP or WebSocket; a leaf node or an MQTT session would bring its own
	// subscriptions, which these permissions were not written for.
	claims.AllowedConnectionTypes = jwt.StringList{jwt.ConnectionTypeStandard, jwt.ConnectionTypeWebsocket}
	token, err := claims.Encode(i.signer)
	if err != nil {
		return Credentials{}, fmt.Errorf("signing a NATS user JWT: %w", err)
	}
	if len(token) > maxJWT {
		return Credentials{}, fmt.Errorf("the NATS user JWT for account %s is %d bytes, more than a NATS server takes in a CONNECT (%d): the stream name %q is too long (NATS_STREAM)", accountID, len(token), maxJWT, i.stream)
	}
	c := Credentials{
		JWT: token, ExpiresAt: expires, Stream: i.stream,
		Subjects: AccountSubjects(accountID), InboxPrefix: InboxPrefix(accountID), APIPrefix: APIPrefix,
		ConsumerPrefix: prefix, Consumers: consumers, Servers: i.servers,
	}
	if seed != nil {
		creds, err := jwt.FormatUserConfig(token, seed)
		if err != nil {
			return Credentials{}, fmt.Errorf("formatting NATS credentials: %w", err)
		}
		c.Seed, c.Creds = string(seed), string(creds)
	}
	return c, nil
}

// checkUserKey refuses a key that is not a user public key, without echoing it: a client that
// sent its seed by mistake should not find it in an error or a log.
func checkUserKey(key string) error {
	switch {
	case nkeys.IsValidPublicUserKey(key):
		return nil
	case strings.HasPrefix(key, "S"):
		return &BadKeyError{Problem: "is a seed, not a public key: send the user's public key (U…) and keep the seed"}
	}
	return &BadKeyError{Problem: "is not a NATS user public key (56 characters starting with U)"}
}

// maxTTL is the longest NATS_CREDENTIALS_TTL. Credentials cannot be taken back: ones issued
// before the account's secret was rotated or the account deleted go on working until they
// expire, and the server closes their connections then, so the lifetime bounds how long.
const maxTTL = time.Hour

// IssuerConfig is how a deployment hands out clients' NATS credentials, as the NATS_* variables
// set it.
type IssuerConfig struct {
	// URL is the servers (NATS_URL); empty: no credentials.
	URL string
	// SigningSeed is the account's signing key seed (NATS_ACCOUNT_SIGNING_SEED), or
	// SigningSeedSecret the Secrets Manager secret holding it (NATS_ACCOUNT_SIGNING_SEED_SECRET).
	SigningSeed, SigningSeedSecret string
	// Account is the account's public key when the seed is a signing key (NATS_ACCOUNT).
	Account string
	// Stream is the stream (NATS_STREAM); CredentialsTTL how long credentials last
	// (NATS_CREDENTIALS_TTL: default 15m, at most 1h); ClientURLs, comma-separated, where
	// clients connect (NATS_CLIENT_URLS, default URL).
	Stream, CredentialsTTL, ClientURLs string
}

// IssuerFromConfig builds the Issuer c configures, or nil when it hands out no NATS
// credentials: c has no URL, or no signing seed. A seed in Secrets Manager is read with secret.
func IssuerFromConfig(ctx context.Context, c IssuerConfig, secret func(ctx context.Context, id string) (string, error)) (*Issuer, error) {
	url := c.URL
	if url == "" {
		return nil, nil
	}
	seed := c.SigningSeed
	if id := c.SigningSeedSecret; id != "" {
		if secret == nil {
			return nil, errors.New("NATS_ACCOUNT_SIGNING_SEED_SECRET is set but no Secrets Manager client is")
		}
		var err error
		if seed, err = secret(ctx, id); err != nil {
			return nil, fmt.Errorf("reading NATS_ACCOUNT_SIGNING_SEED_SECRET: %w", err)
		}
	}
	if seed == "" {
		return nil, nil
	}
	ttl := 15 * time.Minute
	if s := c.CredentialsTTL; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > maxTTL {
			return nil, fmt.Errorf("NATS_CREDENTIALS_TTL is %q, want a positive duration of at most 1h, such as 15m", s)
		}
		ttl = d
	}
	urls := c.ClientURLs
	if urls == "" {
		urls = url
	}
	var servers []string
	for _, u := range strings.Split(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			servers = append(servers, u)
		}
	}
	iss, err := NewIssuer(seed, c.Account, c.Stream, ttl, servers)
	if err != nil {
		return nil, fmt.Errorf("configuring NATS credentials: %w", err)
	}
	return iss, nil
}
