// Package mcpeverything runs the MCP reference server, @modelcontextprotocol/server-everything
// (pinned in infra/node), over Streamable HTTP for the tests and make dev: a real remote MCP
// server with tools that echo, add, return images, structured content, resources and
// progress. It listens on a free port of 127.0.0.1 only, through
// infra/node/mcp-everything-loopback.mjs (the package's own entry listens on every
// interface), and is stopped by the process id it was started with, never by name.
package mcpeverything

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a running server-everything.
type Server struct {
	// URL is its Streamable HTTP endpoint, http://127.0.0.1:PORT/mcp.
	URL string

	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
	once sync.Once
}

// readyPrefix starts the line the launcher prints once it listens; the endpoint follows it.
const readyPrefix = "mcp-everything listening on "

// readyWithin bounds how long Start waits for the server to answer.
const readyWithin = 30 * time.Second

// Start runs server-everything (from root/infra/node/node_modules) in its Streamable HTTP mode
// with node (a Node 22 binary), on a free port of 127.0.0.1, and returns once it answers. Its
// output goes to log (nil: discarded). The port is the one the system gave the launcher, read
// from its output, so no other process can take it between choosing and listening.
func Start(node, root string, log io.Writer) (*Server, error) {
	if log == nil {
		log = io.Discard
	}
	script := filepath.Join(root, "infra", "node", "mcp-everything-loopback.mjs")
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.Stderr = log
	// Killed with this process, so a test that dies leaves no server behind.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting server-everything with %s: %w", node, err)
	}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	endpoint := make(chan string, 1)
	go func() {
		// Every line goes to log, and reading goes on after the endpoint so the server never
		// blocks on a full pipe.
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			if u, ok := strings.CutPrefix(line, readyPrefix); ok {
				select {
				case endpoint <- strings.TrimSpace(u):
				default:
				}
			}
		}
		_, _ = io.Copy(log, out)
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(endpoint); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits for the launcher's endpoint line, then for the endpoint to answer an MCP
// request (a GET without a session, which it refuses with a JSON-RPC error).
func (s *Server) waitReady(endpoint <-chan string) error {
	deadline := time.After(readyWithin)
	select {
	case s.URL = <-endpoint:
	case <-s.done:
		return fmt.Errorf("server-everything exited before it listened (%v); see its output", s.cmd.ProcessState)
	case <-deadline:
		return fmt.Errorf("server-everything did not listen within %s", readyWithin)
	}
	var last error
	for {
		if last = probe(s.URL); last == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("server-everything exited before it answered at %s (%v); see its output", s.URL, s.cmd.ProcessState)
		case <-deadline:
			return fmt.Errorf("server-everything did not answer at %s: %v", s.URL, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// probe checks that url answers as an MCP endpoint does.
func probe(url string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	res, err := c.Get(url)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if !bytes.Contains(body, []byte(`"jsonrpc"`)) {
		return errors.New("the answer is not JSON-RPC: " + strings.TrimSpace(string(body)))
	}
	return nil
}

// Stop ends the process Start started, by its pid: SIGTERM, then SIGKILL after five seconds.
// It waits for the process to exit; a second call does nothing.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}
