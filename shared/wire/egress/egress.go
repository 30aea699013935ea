// Package egress keeps the model calls an account points somewhere (an agent's model.baseURL)
// from reaching the operator's own network: the Lambda runtime API on 127.0.0.1, instance and
// container credentials on 169.254.0.0/16, private ranges of the VPC. The check is made on the
// address each connection is about to use, after DNS, so a name that resolves (or re-resolves)
// to such an address is refused as surely as a literal one, and so is a redirect to one.
package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/agentharness/harness/shared/wire/reqbody"
)

// AllowVar is the variable with which the operator lets agents call private endpoints too:
// PrivateAllowed reports whether its value is "allow".
const AllowVar = "MODEL_PRIVATE_ENDPOINTS"

// PrivateAllowed reports whether value, the operator's AllowVar, is "allow".
func PrivateAllowed(value string) bool {
	return value == "allow"
}

// BlockedError is a connection refused because of the address it would have gone to.
type BlockedError struct {
	Addr   netip.Addr
	Reason string // "a private address", "a loopback address", ...
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("model.baseURL resolves to %s, %s; the harness only calls public model endpoints unless the operator allows private ones with %s=allow",
		e.Addr, e.Reason, AllowVar)
}

// Check returns a *BlockedError for an address that is not public, and nil for one that is.
func Check(ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if reason := nonPublic(ip); reason != "" {
		return &BlockedError{Addr: ip, Reason: reason}
	}
	return nil
}

// Transport returns the process's transport that connects only to public addresses. It uses
// no proxy: a proxy would make the connection on the caller's behalf, out of reach of the
// check. Its other settings are those of http.DefaultTransport. There is one, so a warm
// function reuses its connections (and TLS sessions) from turn to turn.
func Transport() *http.Transport { return publicOnly() }

var publicOnly = sync.OnceValue(func() *http.Transport {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: control}
	return &http.Transport{
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
})

// ModelClient returns the process's client for model calls over base (nil:
// http.DefaultTransport): base's settings with a bound on the wait for response headers (the
// body of a stream is not bounded), so a server that takes the connection and never answers
// fails instead of hanging, and each request's headers and body sent in one write
// (reqbody). There is one per base: a client made per turn would open a connection per turn and
// leave it idle until its timeout.
func ModelClient(base *http.Transport) *http.Client {
	var rt http.RoundTripper = http.DefaultTransport
	if base != nil {
		rt = base
	}
	if c, ok := modelClients.Load(rt); ok {
		return c.(*http.Client)
	}
	sender := rt
	if t, ok := rt.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = ModelHeaderTimeout
		sender = t
	}
	c := &http.Client{Transport: reqbody.Transport{Base: sender}}
	got, _ := modelClients.LoadOrStore(rt, c)
	return got.(*http.Client)
}

// ModelHeaderTimeout bounds the wait for a model's response headers.
const ModelHeaderTimeout = 10 * time.Minute

var modelClients sync.Map // base http.RoundTripper to *http.Client

// control runs before each connect with the resolved address ("10.0.0.5:443", "[::1]:80").
func control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("model.baseURL: refusing to connect to %q: %w", address, err)
	}
	return Check(ap.Addr())
}

// special are the ranges beyond those netip classifies that no public model endpoint uses.
var special = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `a "this network" address`},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},     // and 255.255.255.255
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol address"}, // Teredo among them
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// nonPublic says what kind of non-public address ip (unmapped, without zone) is, or "".
func nonPublic(ip netip.Addr) string {
	switch {
	case !ip.IsValid():
		return "not an address"
	case ip.IsUnspecified():
		return "an unspecified address"
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsLinkLocalUnicast():
		return "a link-local address"
	case ip.IsMulticast():
		return "a multicast address"
	}
	for _, s := range special {
		if s.prefix.Contains(ip) {
			return s.reason
		}
	}
	if ip.Is6() {
		b := ip.As16()
		// Addresses that carry an IPv4 address are as public as the one they carry: NAT64 is
		// how an IPv6-only subnet reaches every IPv4 endpoint.
		var inner netip.Addr
		switch {
		case nat64.Contains(ip):
			inner = netip.AddrFrom4([4]byte(b[12:16]))
		case sixToFour.Contains(ip):
			inner = netip.AddrFrom4([4]byte(b[2:6]))
		case !global6.Contains(ip):
			return "a non-public IPv6 address"
		}
		if inner.IsValid() {
			if reason := nonPublic(inner); reason != "" {
				return fmt.Sprintf("which carries %s, %s", inner, reason)
			}
		}
	}
	if !ip.IsGlobalUnicast() {
		return "a non-public address"
	}
	return ""
}
