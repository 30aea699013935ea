package egress

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCheck(t *testing.T) {
	blocked := []struct {
		addr, reason string
	}{
		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		{"10.0.0.5", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd00:ec2::254", "private"}, // EC2 metadata over IPv6
		{"169.254.169.254", "link-local"},
		{"169.254.170.2", "link-local"}, // container credentials
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"0.1.2.3", "this network"},
		{"198.18.0.1", "benchmarking"},
		{"255.255.255.255", "reserved"},
		{"192.0.2.1", "documentation"},
		{"2001:db8::1", "documentation"},
		{"fec0::1", "non-public"},    // site-local
		{"::a00:5", "non-public"},    // IPv4-compatible 10.0.0.5
		{"2001::1", "IETF protocol"}, // Teredo
		// IPv4-mapped IPv6: the IPv4 address it maps is what counts.
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.5", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:100.64.0.1", "carrier-grade NAT"},
		// NAT64 and 6to4 carry an IPv4 address.
		{"64:ff9b::a9fe:a9fe", "carries 169.254.169.254, a link-local address"},
		{"2002:a00:5::1", "carries 10.0.0.5, a private address"},
	}
	for _, tt := range blocked {
		err := Check(netip.MustParseAddr(tt.addr))
		var be *BlockedError
		if !errors.As(err, &be) {
			t.Errorf("Check(%s) = %v, want a *BlockedError", tt.addr, err)
			continue
		}
		if !strings.Contains(be.Reason, tt.reason) {
			t.Errorf("Check(%s) reason = %q, want it to say %q", tt.addr, be.Reason, tt.reason)
		}
	}
	public := []string{
		"8.8.8.8", "1.1.1.1", "52.94.236.248", "11.0.0.1", "172.32.0.1", "100.128.0.1", "169.255.0.1",
		"2606:4700:4700::1111", "2a00:1450:4001:80b::200a",
		"::ffff:8.8.8.8",
		"64:ff9b::808:808", // NAT64 of 8.8.8.8: how an IPv6-only subnet reaches it
		"2002:808:808::1",
	}
	for _, a := range public {
		if err := Check(netip.MustParseAddr(a)); err != nil {
			t.Errorf("Check(%s) = %v, want nil (a public address)", a, err)
		}
	}
}

func TestBlockedErrorSaysWhatAndWhy(t *testing.T) {
	err := Check(netip.MustParseAddr("::ffff:10.0.0.5"))
	want := "model.baseURL resolves to 10.0.0.5, a private address; the harness only calls public model endpoints unless the operator allows private ones with MODEL_PRIVATE_ENDPOINTS=allow"
	if err == nil || err.Error() != want {
		t.Errorf("Check(::ffff:10.0.0.5) = %v, want %q", err, want)
	}
}

func TestControl(t *testing.T) {
	for _, a := range []string{"8.8.8.8:443", "[2606:4700:4700::1111]:443"} {
		if err := control("tcp", a, nil); err != nil {
			t.Errorf("control(%s) = %v, want nil", a, err)
		}
	}
	for _, a := range []string{"127.0.0.1:9001", "169.254.169.254:80", "[::1]:443", "[fe80::1%lo]:80", "[::ffff:10.0.0.5]:443", "not-an-address"} {
		if err := control("tcp", a, nil); err == nil {
			t.Errorf("control(%s) = nil, want an error", a)
		}
	}
}

// TestTransportRefusesAtConnect reaches a server on 127.0.0.1 by its address and by a name that
// resolves to it: the guarded transport must refuse both before any request is sent, while an
// ordinary transport gets through.
func TestTransportRefusesAtConnect(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	if resp, err := srv.Client().Get(srv.URL); err != nil {
		t.Fatalf("an ordinary client cannot reach the server: %v", err)
	} else {
		resp.Body.Close()
	}
	hits.Store(0)

	client := &http.Client{Transport: Transport()}
	for _, u := range []string{srv.URL, "http://localhost:" + strconv.Itoa(port)} {
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			t.Errorf("GET %s through Transport() = %s, want a refusal", u, resp.Status)
			continue
		}
		var be *BlockedError
		if !errors.As(err, &be) || !be.Addr.IsLoopback() {
			t.Errorf("GET %s = %v, want a *BlockedError naming a loopback address", u, err)
		}
		if !strings.Contains(err.Error(), "MODEL_PRIVATE_ENDPOINTS=allow") {
			t.Errorf("GET %s = %v, want it to name MODEL_PRIVATE_ENDPOINTS=allow", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server saw %d requests through Transport(), want 0", n)
	}
}

func TestPrivateAllowed(t *testing.T) {
	for v, want := range map[string]bool{"allow": true, "": false, "deny": false, "1": false} {
		if got := PrivateAllowed(v); got != want {
			t.Errorf("PrivateAllowed(%s=%q) = %v, want %v", AllowVar, v, got, want)
		}
	}
}
