// Command mockopenai serves the scripted OpenAI-compatible Chat Completions API of package
// mockopenai on the loopback interface. Its first stdout line is "listening http://127.0.0.1:PORT",
// so a parent process can start it with -port 0 and read where it landed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/agentharness/harness/infra/mockopenai"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	port := flag.Int("port", 0, "TCP port on 127.0.0.1; 0 picks a free one")
	delay := flag.Duration("chunk-delay", 0, "wait before each streamed chunk, to imitate token pacing")
	flag.Parse()

	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	// Nobody can ask this process for its recordings, so keeping them would only grow memory.
	srv := &http.Server{Handler: mockopenai.New(&mockopenai.Options{ChunkDelay: *delay, NoRecord: true})}
	fmt.Printf("listening http://%s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down: %w", err)
	}
	return nil
}
