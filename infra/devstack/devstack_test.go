package devstack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

type entry struct {
	name, body string
	typ        byte
}

// tarball builds a gzip-compressed tar in memory.
func tarball(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: e.typ}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeSymlink {
			h.Linkname, h.Size = e.body, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var testFiles = []string{"package.json", "dist/client.js"}

func TestExtractPackage(t *testing.T) {
	tgz := tarball(t,
		entry{name: "package/package.json", body: `{"name":"x"}`},
		entry{name: "package/dist/other.js", body: "skipped"},
		entry{name: "package/dist/client.js", body: "export {}"},
		entry{name: "package/README.md", body: "skipped"},
	)
	dest := t.TempDir()
	if err := extractPackage(bytes.NewReader(tgz), dest, testFiles); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"package.json": `{"name":"x"}`, "dist/client.js": "export {}"} {
		got, err := os.ReadFile(filepath.Join(dest, filepath.FromSlash(name)))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"dist/other.js", "README.md"} {
		if _, err := os.Stat(filepath.Join(dest, filepath.FromSlash(name))); err == nil {
			t.Errorf("%s was extracted; only the listed files should be", name)
		}
	}
}

func TestExtractPackageRefuses(t *testing.T) {
	good := []entry{
		{name: "package/package.json", body: "{}"},
		{name: "package/dist/client.js", body: "export {}"},
	}
	cases := map[string]struct {
		entries []entry
		errHas  string
	}{
		"parent traversal": {append([]entry{{name: "package/../../evil.js", body: "x"}}, good...), "unsafe path"},
		"wanted traversal": {append([]entry{{name: "package/dist/../../package.json", body: "x"}}, good...), "unsafe path"},
		"absolute path":    {append([]entry{{name: "/etc/evil", body: "x"}}, good...), "unsafe path"},
		"symlink":          {[]entry{good[0], {name: "package/dist/client.js", body: "/etc/passwd", typ: tar.TypeSymlink}}, "not a regular file"},
		"duplicate":        {append(good, good[1]), "appears twice"},
		"missing file":     {good[:1], "no entry package/dist/client.js"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "pkg")
			if err := os.Mkdir(dest, 0o755); err != nil {
				t.Fatal(err)
			}
			err := extractPackage(bytes.NewReader(tarball(t, c.entries...)), dest, testFiles)
			if err == nil || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("err = %v, want one containing %q", err, c.errHas)
			}
			if _, err := os.Stat(filepath.Join(parent, "evil.js")); err == nil {
				t.Error("a file was written outside the destination")
			}
		})
	}
}

func TestVerifyIntegrity(t *testing.T) {
	data := []byte("tarball bytes")
	sum := sha512.Sum512(data)
	good := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	if err := verifyIntegrity(data, good); err != nil {
		t.Errorf("matching integrity: %v", err)
	}
	if err := verifyIntegrity([]byte("other bytes"), good); err == nil || !strings.Contains(err.Error(), "integrity mismatch") {
		t.Errorf("mismatching data: err = %v", err)
	}
	for _, bad := range []string{"sha1-abc", "sha512-not base64!", "sha512-" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if err := verifyIntegrity(data, bad); err == nil {
			t.Errorf("integrity %q accepted", bad)
		}
	}
	// The pinned value must at least be well-formed.
	if err := verifyIntegrity(nil, lettaIntegrity); err == nil || !strings.Contains(err.Error(), "mismatch") {
		t.Errorf("pinned integrity: err = %v, want a mismatch for empty data", err)
	}
}

// TestStandInsListenOnLoopbackOnly starts the stand-ins and reads the kernel's socket tables
// (/proc/net/tcp and /proc/net/tcp6): every listening socket on a stand-in's port, and every
// listening socket a stand-in's process owns, must be bound to 127.0.0.1, none to 0.0.0.0, ::
// or another address. Java's sockets are IPv6 ones, so DynamoDB Local's shows in tcp6 as the
// IPv4-mapped ::ffff:127.0.0.1 (0000000000000000FFFF00000100007F), which only 127.0.0.1
// reaches; node's shows in tcp as 0100007F.
func TestStandInsListenOnLoopbackOnly(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	// A file, not a buffer: the two processes write to it at once.
	logf, err := os.Create(filepath.Join(t.TempDir(), "stand-ins.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, root, logf)
	if err != nil {
		out, _ := os.ReadFile(logf.Name())
		t.Fatalf("starting the stand-ins: %v\nstand-in output:\n%s", err, out)
	}
	defer s.Stop()
	endpoints := map[string]string{"DynamoDB Local": s.DynamoDB, "fauxqs": s.SQS}
	if len(s.procs) != len(endpoints) {
		t.Fatalf("Start started %d processes, want %d", len(s.procs), len(endpoints))
	}

	sockets := listeningSockets(t)
	loopback := net.IPv4(127, 0, 0, 1)
	for _, p := range s.procs {
		si := struct {
			name string
			pid  int
		}{p.name, p.cmd.Process.Pid}
		u, err := url.Parse(endpoints[si.name])
		if err != nil {
			t.Fatal(err)
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			t.Fatalf("%s has no endpoint with a port (%q)", si.name, endpoints[si.name])
		}
		owned := socketInodes(t, si.pid)
		found := false
		for _, ls := range sockets {
			onPort, mine := ls.port == port, owned[ls.inode]
			if !onPort && !mine {
				continue
			}
			found = found || (onPort && mine)
			t.Logf("%s (pid %d): %s has a listening socket on %s (%s) port %d, its own: %v", si.name, si.pid, ls.table, ls.addr, ls.raw, ls.port, mine)
			if !ls.addr.Equal(loopback) {
				t.Errorf("%s: a socket in %s listens on [%s]:%d, want 127.0.0.1 only", si.name, ls.table, ls.addr, ls.port)
			}
		}
		if !found {
			t.Errorf("%s (pid %d) has no listening socket on its port %d", si.name, si.pid, port)
		}
	}
}

type listenSocket struct {
	table string // /proc/net/tcp or /proc/net/tcp6
	raw   string // the local address as the table prints it
	addr  net.IP
	port  int
	inode string
}

// listeningSockets returns the TCP sockets in state LISTEN from /proc/net/tcp and tcp6.
func listeningSockets(t *testing.T) []listenSocket {
	t.Helper()
	var out []listenSocket
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for _, line := range lines[1:] { // the first line is a header
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A is TCP_LISTEN
				continue
			}
			hexAddr, hexPort, ok := strings.Cut(f[1], ":")
			if !ok {
				t.Fatalf("%s: unexpected local address %q", table, f[1])
			}
			addr, err := procAddr(hexAddr)
			if err != nil {
				t.Fatalf("%s: %v", table, err)
			}
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if err != nil {
				t.Fatalf("%s: unexpected port %q", table, hexPort)
			}
			out = append(out, listenSocket{table, hexAddr, addr, int(port), f[9]})
		}
	}
	return out
}

// procAddr decodes an address as /proc/net/tcp* prints it: each 32-bit word in hex, in the
// host's byte order (127.0.0.1 is 0100007F on little-endian machines).
func procAddr(h string) (net.IP, error) {
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != net.IPv4len && len(b) != net.IPv6len) {
		return nil, fmt.Errorf("unexpected address %q", h)
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.NativeEndian.PutUint32(ip[i:], binary.BigEndian.Uint32(b[i:]))
	}
	return ip, nil
}

// socketInodes returns the inodes of the sockets process pid has open.
func socketInodes(t *testing.T, pid int) map[string]bool {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if err != nil {
			continue // closed since
		}
		if inode, ok := strings.CutPrefix(target, "socket:["); ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	return inodes
}
