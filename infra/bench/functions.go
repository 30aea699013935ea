package main

// The function-level benchmark: each function's real bootstrap binary, built as make build
// builds it (for this machine), run as its own process against infra/lambdaruntime, a local
// stand-in of the Lambda Runtime API, beside infra/node/lambda-aisdk.mjs, the AI SDK turn as a
// Node custom runtime on the same stand-in. Measured from outside the processes:
//
//   - cold start: process start to its first /next (init), to the first byte of the first
//     turn's body, and to that turn's end; the event is queued before the process starts, as
//     Lambda holds the event that starts an environment. Median of -cold-starts starts each;
//   - per turn, once warm: CPU (utime+stime of /proc/<pid>/stat) over -fn-turns turns and over
//     the turns after them up to -fn-turns-long, and peak RSS (VmHWM of /proc/<pid>/status)
//     at both points, so a leak shows as a rising peak;
//   - for every function of template.yaml: the binary's size and its init time.
//
// Every turn is a Function URL event for POST / (a new conversation, as in the harness rows),
// and its streamed body is checked like theirs.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentharness/harness/infra/lambdaruntime"
	"github.com/agentharness/harness/infra/localrunner"
	"github.com/agentharness/harness/infra/template"
	"github.com/agentharness/harness/shared/lambda/logging"
	"github.com/agentharness/harness/shared/wire/awsclient"
	"github.com/aws/aws-lambda-go/events"
	"gopkg.in/yaml.v3"
)

// fnConfig is the function-level benchmark's workload.
type fnConfig struct {
	enabled    bool
	turns      int // measured turns; the first peak RSS reading follows them
	longTurns  int // turns in all at the second peak RSS reading
	warmup     int
	coldStarts int
	cpuProfile string // where to write a CPU profile of harness-processing's measured turns; "": none
}

// fnFlags registers the function-level benchmark's flags; run reads them after flag.Parse.
func fnFlags() *fnConfig {
	c := &fnConfig{}
	flag.BoolVar(&c.enabled, "functions", true, "also measure the functions alone: bootstrap binaries and the Node reference on a Lambda Runtime API stand-in")
	flag.IntVar(&c.turns, "fn-turns", 1000, "functions: measured turns per runtime, after which peak RSS is read")
	flag.IntVar(&c.longTurns, "fn-turns-long", 5000, "functions: turns in all when peak RSS is read again")
	flag.IntVar(&c.warmup, "fn-warmup", 50, "functions: turns before measuring")
	flag.IntVar(&c.coldStarts, "cold-starts", 5, "functions: cold starts per runtime (and init runs per function); the median is reported")
	flag.StringVar(&c.cpuProfile, "fn-cpuprofile", "", "functions: after the measurements, run harness-processing built with the benchprofile tag again and write a CPU profile of its -fn-turns turns after the warm-up to this file")
	return c
}

func (c fnConfig) check() error {
	if c.turns < 1 || c.longTurns < c.turns || c.warmup < 0 || c.coldStarts < 1 {
		return fmt.Errorf("-fn-turns and -cold-starts must be at least 1, -fn-turns-long at least -fn-turns (%d), -fn-warmup at least 0", c.turns)
	}
	return nil
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux ABI.
const clockTick = 10 * time.Millisecond

// harnessFunction is the function whose turns are measured.
const harnessFunction = "HarnessProcessingFunction"

// fnReport is what the function-level benchmark found.
type fnReport struct {
	coldStarts int
	harness    turnRuntime
	node       turnRuntime
	functions  []fnInit // by logical id, in template order
	goarch     string
}

// turnRuntime is one runtime's cold starts and steady turns.
type turnRuntime struct {
	name string
	// Medians over the cold starts, from process start.
	initMs, firstByteMs, firstTurnMs float64
	turns, longTurns                 int
	cpuMsPerTurn, longCPUMsPerTurn   float64 // turns 1..turns, then turns+1..longTurns
	p50Ms                            float64 // latency of turns 1..turns, invocation to the body's end
	hwmKB, longHWMKB                 int64   // VmHWM after turns and after longTurns
}

// fnInit is one function's binary and init time.
type fnInit struct {
	logicalID, binary string
	sizeBytes         int64
	initMs            float64 // median
	err               error   // why it could not start, reported instead of a time
}

// runFunctions runs the function-level benchmark against the model mock at mockURL.
func runFunctions(ctx context.Context, root, mockURL, node string, c fnConfig) (*fnReport, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(node); err != nil {
		return nil, fmt.Errorf("node 22 not found (run npm ci in infra/node, or pass -node): %w", err)
	}
	tpl, err := template.Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	memory, err := memorySizes(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-functions-")
	if err != nil {
		return nil, fmt.Errorf("making a temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	log.Printf("functions: building the bootstrap binaries")
	bins, err := buildFunctions(ctx, root, dir, tpl.Functions())
	if err != nil {
		return nil, err
	}

	st, err := newFnStack(ctx, tpl, mockURL, memory)
	if err != nil {
		return nil, err
	}
	r := &fnReport{coldStarts: c.coldStarts, goarch: runtime.GOOS + "/" + runtime.GOARCH}
	var harnessFn template.Function
	for _, fn := range tpl.Functions() {
		if fn.LogicalID == harnessFunction {
			harnessFn = fn
		}
	}
	if harnessFn.LogicalID == "" {
		return nil, errors.New("template.yaml has no " + harnessFunction)
	}
	harnessSpec, err := st.functionSpec(harnessFn, bins[harnessFn.LogicalID])
	if err != nil {
		return nil, err
	}
	nodeSpec := st.nodeSpec(node, filepath.Join(root, "infra", "node", "lambda-aisdk.mjs"), memory[harnessFunction])
	r.harness.name = "harness-processing (Go bootstrap)"
	r.node.name = "AI SDK v7, Node " + nodeVersion(ctx, node) + " (lambda-aisdk.mjs)"

	// Cold starts alternate between the two, so a slower minute weighs on both alike.
	log.Printf("functions: %d cold starts each of harness-processing and the Node reference", c.coldStarts)
	var hc, nc []coldSample
	for i := range c.coldStarts {
		s, err := st.coldTurn(ctx, harnessSpec)
		if err != nil {
			return nil, fmt.Errorf("harness-processing cold start %d: %w", i, err)
		}
		hc = append(hc, s)
		s, err = st.coldTurn(ctx, nodeSpec)
		if err != nil {
			return nil, fmt.Errorf("lambda-aisdk.mjs cold start %d: %w", i, err)
		}
		nc = append(nc, s)
	}
	r.harness.setCold(hc)
	r.node.setCold(nc)

	for _, rt := range []struct {
		spec runtimeSpec
		out  *turnRuntime
	}{{harnessSpec, &r.harness}, {nodeSpec, &r.node}} {
		log.Printf("functions: %s, %d warm-up turns, then %d turns, peak RSS, up to %d turns, peak RSS", rt.out.name, c.warmup, c.turns, c.longTurns)
		if err := st.steady(ctx, rt.spec, c, rt.out); err != nil {
			return nil, fmt.Errorf("%s: %w", rt.out.name, err)
		}
	}

	if c.cpuProfile != "" {
		if err := st.profile(ctx, root, dir, harnessFn, c); err != nil {
			return nil, fmt.Errorf("profiling harness-processing: %w", err)
		}
	}

	log.Printf("functions: init of every function, %d times each", c.coldStarts)
	for _, fn := range tpl.Functions() {
		bin := bins[fn.LogicalID]
		info, err := os.Stat(bin)
		if err != nil {
			return nil, fmt.Errorf("the %s binary: %w", fn.LogicalID, err)
		}
		f := fnInit{logicalID: fn.LogicalID, binary: filepath.Base(bin), sizeBytes: info.Size()}
		if fn.LogicalID == harnessFunction {
			f.initMs = r.harness.initMs
		} else {
			f.initMs, f.err = st.initTime(ctx, fn, bin, c.coldStarts)
		}
		r.functions = append(r.functions, f)
	}
	return r, nil
}

// buildFunctions builds every function's bootstrap into dir as make build does, for this
// machine, in one go build so the linking runs in parallel; each binary is named after its
// folder.
func buildFunctions(ctx context.Context, root, dir string, fns []template.Function, tags ...string) (map[string]string, error) {
	bins := map[string]string{}
	args := []string{"build", "-trimpath", "-ldflags=-s", "-tags", strings.Join(append([]string{"lambda.norpc"}, tags...), ","), "-o", dir + string(filepath.Separator)}
	for _, fn := range fns {
		folder := filepath.Clean(fn.CodeURI)
		args = append(args, "./"+filepath.ToSlash(folder))
		bins[fn.LogicalID] = filepath.Join(dir, filepath.Base(folder))
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building the functions (go %s): %w\n%s", strings.Join(args, " "), err, out)
	}
	return bins, nil
}

// memorySizes reads MemorySize from template.yaml, Globals' applied to every function that
// sets none (template.Function does not carry it).
func memorySizes(path string) (map[string]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the template: %w", err)
	}
	var doc struct {
		Globals struct {
			Function struct {
				MemorySize int `yaml:"MemorySize"`
			} `yaml:"Function"`
		} `yaml:"Globals"`
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				MemorySize int `yaml:"MemorySize"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("reading MemorySize from the template: %w", err)
	}
	sizes := map[string]int{}
	for id, res := range doc.Resources {
		if res.Type != "AWS::Serverless::Function" {
			continue
		}
		sizes[id] = cmp.Or(res.Properties.MemorySize, doc.Globals.Function.MemorySize, 128) // 128: Lambda's default
	}
	return sizes, nil
}

// fnStack is the provisioned resources, the seeded bench account and what every function's
// environment is made from.
type fnStack struct {
	tpl     *template.Template
	res     *localrunner.Resources
	memory  map[string]int
	mockURL string
	key     string // SECRETS_LOCAL_KEY, shared with the runner that sealed the agent
	secret  string // the bench account's bearer secret
	region  string
	turnSeq int
	runID   string
}

func newFnStack(ctx context.Context, tpl *template.Template, mockURL string, memory map[string]int) (*fnStack, error) {
	cfg, err := awsclient.Config(ctx)
	if err != nil {
		return nil, err
	}
	db, sqsc, s3c := awsclient.DynamoDB(cfg), awsclient.SQS(cfg), awsclient.S3(cfg)
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	res, err := localrunner.Provision(ctx, localrunner.Clients{DB: db, SQS: sqsc, S3: s3c}, tpl, "benchf-"+hex.EncodeToString(id)+"-")
	if err != nil {
		return nil, err
	}
	// The functions open agent secrets with this key, so the runner that seals them at seeding
	// must use it too.
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	st := &fnStack{
		tpl: tpl, res: res, memory: memory, mockURL: mockURL, region: cmp.Or(cfg.Region, "us-east-1"),
		key: base64.StdEncoding.EncodeToString(raw), runID: hex.EncodeToString(id),
	}
	getenv := func(k string) string {
		switch k {
		case "SECRETS_LOCAL_KEY":
			return st.key
		case "OPENAI_BASE_URL":
			return mockURL + "/v1"
		}
		return ""
	}
	runner, err := localrunner.New(localrunner.Options{
		Template: tpl, DB: db, SQS: sqsc, S3: s3c, Name: res.Name, Getenv: getenv, Logger: logging.New(io.Discard, ""),
	})
	if err != nil {
		return nil, err
	}
	if st.secret, err = seedAgent(ctx, runner, benchAgent(mockURL)); err != nil {
		return nil, err
	}
	return st, nil
}

// runtimeSpec is how to start one runtime process.
type runtimeSpec struct {
	name    string // AWS_LAMBDA_FUNCTION_NAME, and the ARN's
	argv    []string
	dir     string
	env     []string
	timeout time.Duration
}

// lambdaEnv is what Lambda defines in every execution environment, less the credentials and
// the region, which come from this process's AWS_* variables with the endpoints of the stack.
func (st *fnStack) lambdaEnv(name, handler, taskRoot string, memoryMB int) []string {
	env := []string{
		"AWS_LAMBDA_FUNCTION_NAME=" + name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(memoryMB),
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_INITIALIZATION_TYPE=on-demand",
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + name,
		"AWS_LAMBDA_LOG_STREAM_NAME=bench/" + st.runID,
		"_HANDLER=" + handler,
		"LAMBDA_TASK_ROOT=" + taskRoot,
		"LAMBDA_RUNTIME_DIR=" + taskRoot,
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=en_US.UTF-8",
		"TZ=:UTC",
	}
	have := map[string]bool{"AWS_REGION": false, "AWS_DEFAULT_REGION": false}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") && !strings.HasPrefix(k, "AWS_LAMBDA_") {
			env = append(env, kv)
			have[k] = true
		}
	}
	for k, ok := range have {
		if !ok {
			env = append(env, k+"="+st.region)
		}
	}
	return env
}

// functionSpec starts a function's bootstrap with its template environment, as the local
// runner builds it: SECRETS_LOCAL_KEY stands in for KMS, and OPENAI_BASE_URL names the mock,
// the operator's own model server, so the bench agent's baseURL passes the egress guard.
func (st *fnStack) functionSpec(fn template.Function, bin string) (runtimeSpec, error) {
	tplEnv, err := st.tpl.FunctionEnv(fn, st.res.Name)
	if err != nil {
		return runtimeSpec{}, err
	}
	delete(tplEnv, "SECRETS_KMS_KEY_ID")
	tplEnv["SECRETS_LOCAL_KEY"] = st.key
	tplEnv["OPENAI_BASE_URL"] = st.mockURL + "/v1"
	name := st.res.Prefix + fn.LogicalID
	env := st.lambdaEnv(name, cmp.Or(fn.Handler, "bootstrap"), filepath.Dir(bin), st.memory[fn.LogicalID])
	for _, k := range slices.Sorted(maps.Keys(tplEnv)) {
		env = append(env, k+"="+tplEnv[k])
	}
	return runtimeSpec{name: name, argv: []string{bin}, dir: filepath.Dir(bin), env: env, timeout: timeout(fn.Timeout)}, nil
}

// nodeSpec starts lambda-aisdk.mjs under Node with harness-processing's memory size.
func (st *fnStack) nodeSpec(node, script string, memoryMB int) runtimeSpec {
	name := st.res.Prefix + "AISDKReference"
	env := append(st.lambdaEnv(name, filepath.Base(script), filepath.Dir(script), memoryMB), "OPENAI_BASE_URL="+st.mockURL+"/v1")
	return runtimeSpec{name: name, argv: []string{node, script}, dir: filepath.Dir(script), env: env, timeout: timeout(900)}
}

func timeout(seconds int) time.Duration {
	return time.Duration(max(seconds, 3)) * time.Second // 3 s: Lambda's default
}

// start starts spec's process on a new stand-in; stop ends both.
func (spec runtimeSpec) start() (*lambdaruntime.Server, *lambdaruntime.Process, func(), error) {
	srv, err := lambdaruntime.New(lambdaruntime.Options{FunctionName: spec.name, Timeout: spec.timeout})
	if err != nil {
		return nil, nil, nil, err
	}
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir, cmd.Env = spec.dir, slices.Clone(spec.env)
	dieWithParent(cmd)
	p, err := srv.Start(cmd)
	if err != nil {
		srv.Close()
		return nil, nil, nil, err
	}
	return srv, p, func() { p.Stop(); srv.Close() }, nil
}

// turnEvent is a Function URL event for POST / of a new conversation, with the body and the
// bearer secret the harness rows send.
func (st *fnStack) turnEvent() []byte {
	st.turnSeq++
	now := time.Now()
	ev := struct {
		RouteKey string `json:"routeKey"`
		events.LambdaFunctionURLRequest
	}{RouteKey: "$default"}
	ev.Version, ev.RawPath = "2.0", "/"
	ev.Headers = map[string]string{
		"authorization": "Bearer " + st.secret, "content-type": "application/json",
		"host": "bench.lambda-url." + st.region + ".on.aws", "user-agent": "bench",
	}
	ev.Body = fmt.Sprintf(`{"agentId":"bench","id":"fn-%s-%d","message":"What time is it?"}`, st.runID, st.turnSeq)
	rc := &ev.RequestContext
	rc.AccountID, rc.APIID, rc.DomainName, rc.DomainPrefix = "anonymous", "bench", "bench.lambda-url."+st.region+".on.aws", "bench"
	rc.RequestID, rc.Time, rc.TimeEpoch = fmt.Sprintf("req-%d", st.turnSeq), now.UTC().Format("02/Jan/2006:15:04:05 -0700"), now.UnixMilli()
	rc.HTTP.Method, rc.HTTP.Path, rc.HTTP.Protocol, rc.HTTP.SourceIP, rc.HTTP.UserAgent = http.MethodPost, "/", "HTTP/1.1", "127.0.0.1", "bench"
	b, _ := json.Marshal(ev)
	return b
}

// readTurn checks a turn's streamed Function URL response to its end.
func readTurn(resp *lambdaruntime.Response) error {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("the function answered %d %v: %s", resp.StatusCode, resp.Headers, bytes.TrimSpace(msg))
	}
	_, err := checkTurn(resp.Body)
	return err
}

// coldSample is one cold start, each time from the process's start.
type coldSample struct{ init, firstByte, firstTurn time.Duration }

// coldTurn starts a runtime with one turn's event waiting and times it to the turn's end.
func (st *fnStack) coldTurn(ctx context.Context, spec runtimeSpec) (coldSample, error) {
	srv, err := lambdaruntime.New(lambdaruntime.Options{FunctionName: spec.name, Timeout: spec.timeout})
	if err != nil {
		return coldSample{}, err
	}
	defer srv.Close()
	inv := srv.Enqueue(st.turnEvent())
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir, cmd.Env = spec.dir, slices.Clone(spec.env)
	dieWithParent(cmd)
	p, err := srv.Start(cmd)
	if err != nil {
		return coldSample{}, err
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := inv.Wait(ctx)
	if err != nil {
		return coldSample{}, err
	}
	if err := readTurn(resp); err != nil {
		return coldSample{}, err
	}
	done := time.Now()
	initAt, err := srv.WaitInit(ctx)
	if err != nil {
		return coldSample{}, err
	}
	return coldSample{init: initAt.Sub(p.Started), firstByte: resp.FirstByte().Sub(p.Started), firstTurn: done.Sub(p.Started)}, nil
}

func (t *turnRuntime) setCold(samples []coldSample) {
	med := func(get func(coldSample) time.Duration) float64 {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = ms(get(s))
		}
		slices.Sort(v)
		return percentile(v, 50)
	}
	t.initMs = med(func(s coldSample) time.Duration { return s.init })
	t.firstByteMs = med(func(s coldSample) time.Duration { return s.firstByte })
	t.firstTurnMs = med(func(s coldSample) time.Duration { return s.firstTurn })
}

// profile builds harness-processing with the benchprofile tag (shared/lambda/lambdadeps/cpuprofile.go)
// and runs it through the warm-up and c.turns turns, profiling those turns into c.cpuProfile. It
// is a run of its own so that the profiler's cost stays out of the measured one.
func (st *fnStack) profile(ctx context.Context, root, dir string, fn template.Function, c fnConfig) error {
	out, err := filepath.Abs(c.cpuProfile)
	if err != nil {
		return err
	}
	log.Printf("functions: profiling %d turns of harness-processing into %s", c.turns, out)
	bins, err := buildFunctions(ctx, root, filepath.Join(dir, "profiled"), []template.Function{fn}, "benchprofile")
	if err != nil {
		return err
	}
	spec, err := st.functionSpec(fn, bins[fn.LogicalID])
	if err != nil {
		return err
	}
	spec.env = append(spec.env, "HARNESS_CPUPROFILE="+out)
	c.longTurns = c.turns
	var discard turnRuntime
	if err := st.steady(ctx, spec, c, &discard); err != nil {
		return err
	}
	if info, err := os.Stat(out); err != nil || info.Size() == 0 {
		return fmt.Errorf("no profile was written to %s (%v)", out, err)
	}
	return nil
}

// steady runs one warm runtime through the warm-up and the measured turns, reading its CPU
// and peak RSS from /proc between them.
func (st *fnStack) steady(ctx context.Context, spec runtimeSpec, c fnConfig, out *turnRuntime) error {
	srv, p, stop, err := spec.start()
	if err != nil {
		return err
	}
	defer stop()
	turns := func(n int, latencies []float64) error {
		for i := range n {
			start := time.Now()
			resp, err := srv.Invoke(ctx, st.turnEvent())
			if err == nil {
				err = readTurn(resp)
			}
			if err != nil {
				return fmt.Errorf("turn %d: %w", i, err)
			}
			if latencies != nil {
				latencies[i] = ms(time.Since(start))
			}
		}
		return nil
	}
	if err := turns(c.warmup, nil); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	pid := p.Pid()
	profiled := slices.ContainsFunc(spec.env, func(kv string) bool { return strings.HasPrefix(kv, "HARNESS_CPUPROFILE=") })
	if profiled {
		if err := signalProfile(p, true); err != nil {
			return err
		}
	}
	cpu0, err := procCPU(pid)
	if err != nil {
		return err
	}
	latencies := make([]float64, c.turns)
	if err := turns(c.turns, latencies); err != nil {
		return err
	}
	if profiled {
		if err := signalProfile(p, false); err != nil {
			return err
		}
	}
	cpu1, err := procCPU(pid)
	if err != nil {
		return err
	}
	if out.hwmKB, err = procHWM(pid); err != nil {
		return err
	}
	if err := turns(c.longTurns-c.turns, nil); err != nil {
		return err
	}
	cpu2, err := procCPU(pid)
	if err != nil {
		return err
	}
	if out.longHWMKB, err = procHWM(pid); err != nil {
		return err
	}
	slices.Sort(latencies)
	out.turns, out.longTurns, out.p50Ms = c.turns, c.longTurns, percentile(latencies, 50)
	out.cpuMsPerTurn = ms(cpu1-cpu0) / float64(c.turns)
	if extra := c.longTurns - c.turns; extra > 0 {
		out.longCPUMsPerTurn = ms(cpu2-cpu1) / float64(extra)
	}
	return nil
}

// initTime starts a function n times and returns the median time to its first /next, or why
// it could not start.
func (st *fnStack) initTime(ctx context.Context, fn template.Function, bin string, n int) (float64, error) {
	spec, err := st.functionSpec(fn, bin)
	if err != nil {
		return 0, err
	}
	var v []float64
	for range n {
		d, err := func() (time.Duration, error) {
			srv, p, stop, err := spec.start()
			if err != nil {
				return 0, err
			}
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			at, err := srv.WaitInit(ctx)
			return at.Sub(p.Started), err
		}()
		if err != nil {
			return 0, err
		}
		v = append(v, ms(d))
	}
	slices.Sort(v)
	return percentile(v, 50), nil
}

// procCPU is a process's user + system time, all its threads, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// The command name, in parentheses, may hold spaces: fields count from the last ")".
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat is %q: no utime and stime", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// procHWM is a process's peak resident set size in kB, VmHWM of /proc/<pid>/status.
func procHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of process %d: %w", pid, err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmHWM %q: %w", pid, v, err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmHWM", pid)
}

// printFunctions prints the function-level tables.
func printFunctions(w io.Writer, r *fnReport) {
	h, n := r.harness, r.node
	ratio := func(node, harness float64) string {
		if harness <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.1f×", node/harness)
	}
	mb := func(kb int64) float64 { return float64(kb) / 1024 }

	fmt.Fprintf(w, "\nThe functions alone, each its own process on a Lambda Runtime API stand-in (infra/lambdaruntime); "+
		"%s binaries built as make build builds them.\n\n", r.goarch)
	fmt.Fprintf(w, "Cold start, from process start, median of %d:\n\n", r.coldStarts)
	fmt.Fprintln(w, "| runtime | init (first /next) ms | first byte of the first turn ms | first turn done ms |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	for _, t := range []turnRuntime{h, n} {
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f |\n", t.name, t.initMs, t.firstByteMs, t.firstTurnMs)
	}
	fmt.Fprintf(w, "| Node / harness | %s | %s | %s |\n", ratio(n.initMs, h.initMs), ratio(n.firstByteMs, h.firstByteMs), ratio(n.firstTurnMs, h.firstTurnMs))

	fmt.Fprintf(w, "\nPer turn, the function process alone (CPU: utime+stime of /proc/<pid>/stat; peak RSS: VmHWM):\n\n")
	fmt.Fprintf(w, "| runtime | CPU ms/turn, turns 1–%d | CPU ms/turn, turns %d–%d | p50 ms | peak RSS MB at %d | peak RSS MB at %d |\n",
		h.turns, h.turns+1, h.longTurns, h.turns, h.longTurns)
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, t := range []turnRuntime{h, n} {
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.2f | %.1f | %.1f |\n", t.name, t.cpuMsPerTurn, t.longCPUMsPerTurn, t.p50Ms, mb(t.hwmKB), mb(t.longHWMKB))
	}
	fmt.Fprintf(w, "| Node / harness | %s | %s | %s | %s | %s |\n", ratio(n.cpuMsPerTurn, h.cpuMsPerTurn), ratio(n.longCPUMsPerTurn, h.longCPUMsPerTurn),
		ratio(n.p50Ms, h.p50Ms), ratio(mb(n.hwmKB), mb(h.hwmKB)), ratio(mb(n.longHWMKB), mb(h.longHWMKB)))

	fmt.Fprintf(w, "\nEvery function's bootstrap (init: process start to its first /next, median of %d):\n\n", r.coldStarts)
	fmt.Fprintln(w, "| function | binary MB | init ms |")
	fmt.Fprintln(w, "| --- | ---: | ---: |")
	for _, f := range r.functions {
		init := fmt.Sprintf("%.1f", f.initMs)
		if f.err != nil {
			init = "did not start: " + strings.ReplaceAll(f.err.Error(), "\n", " ")
		}
		fmt.Fprintf(w, "| %s (%s) | %.1f | %s |\n", f.binary, f.logicalID, float64(f.sizeBytes)/(1<<20), init)
	}
}
