// Package natsserver runs real NATS servers in the process, for make dev and the tests: one node
// or a JetStream cluster, in operator mode with the two accounts a deployment has, so the
// credentials natsturns issues are checked by the server as they are in production:
//
//	harness  holds the stream HARNESS_TURNS; the harness publishes in it. It exports, as
//	         services, the four consumer API subjects of the stream clients read with.
//	clients  imports them; the clients of the harness's accounts connect in it, with the user
//	         JWTs natsturns signs with its signing key.
//
// Clients live in an account of their own because NATS checks where a client publishes, not
// the reply subject it names: in the stream's account, a client could have the server answer an
// API request onto another account's turn subject, and the stream would keep the answer. Across
// the import, answers come back in the clients account, where no stream listens.
//
// Everything is in memory or in temporary directories removed at Shutdown.
package natsserver

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agentharness/harness/shared/edge/natslog"
	"github.com/agentharness/harness/shared/wire/natsturns"
)

// Options says what to run.
type Options struct {
	// Nodes is the number of servers: 1 (the default), or more for a JetStream cluster.
	Nodes int
	// WebSocket also serves NATS over WebSocket (without TLS) on every node.
	WebSocket bool
	// Logf receives the servers' notices, warnings and errors; nil keeps them quiet.
	Logf func(format string, args ...any)
}

// Server is a running set of nodes and the keys of its account "harness".
type Server struct {
	// URL is node 0's client URL (nats://127.0.0.1:port).
	URL string
	// URLs are every node's client URL.
	URLs []string
	// Names are every node's server name, as JetStream's cluster info reports leaders.
	Names []string
	// WebSocketURL is node 0's WebSocket URL (ws://127.0.0.1:port), when Options.WebSocket.
	WebSocketURL string
	// ClientAccount is the identity of the account "clients".
	ClientAccount string
	// ClientSigningSeed is a signing key of the account "clients" (not its identity key), such
	// as natsturns.NewIssuer takes.
	ClientSigningSeed string
	// HarnessCreds is a creds file (jwt.FormatUserConfig) of a user of the account without
	// permission limits: the harness's publisher.
	HarnessCreds string

	nodes []*server.Server
	dirs  []string
	once  sync.Once
}

// readyWithin bounds how long Start waits for the nodes and a JetStream meta leader.
const readyWithin = 30 * time.Second

// Start runs the nodes opts asks for and returns once every node takes connections and
// JetStream has a meta leader.
func Start(opts Options) (*Server, error) {
	if opts.Nodes < 1 {
		opts.Nodes = 1
	}
	k, err := newKeys()
	if err != nil {
		return nil, err
	}
	s := &Server{ClientAccount: k.clientsPub, ClientSigningSeed: k.signingSeed, HarnessCreds: k.harnessCreds}
	routes, err := freeRoutes(opts.Nodes)
	if err != nil {
		return nil, err
	}
	for i := range opts.Nodes {
		node, err := s.startNode(i, opts, k, routes)
		if err != nil {
			s.Shutdown()
			return nil, err
		}
		s.nodes = append(s.nodes, node)
		s.URLs = append(s.URLs, node.ClientURL())
		s.Names = append(s.Names, node.Name())
	}
	s.URL = s.URLs[0]
	if opts.WebSocket {
		s.WebSocketURL = s.nodes[0].WebsocketURL()
	}
	if err := s.waitReady(); err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

// keys are the operator's, the accounts' and the harness user's, and the JWTs they sign.
type keys struct {
	operator               *jwt.OperatorClaims
	systemPub, systemJWT   string
	accountPub, accountJWT string
	clientsPub, clientsJWT string
	signingSeed            string
	harnessCreds           string
}

func newKeys() (keys, error) {
	var k keys
	operator, err := nkeys.CreateOperator()
	if err != nil {
		return k, err
	}
	opPub, _ := operator.PublicKey()
	system, err := nkeys.CreateAccount()
	if err != nil {
		return k, err
	}
	k.systemPub, _ = system.PublicKey()
	account, err := nkeys.CreateAccount()
	if err != nil {
		return k, err
	}
	k.accountPub, _ = account.PublicKey()
	signing, err := nkeys.CreateAccount()
	if err != nil {
		return k, err
	}
	signingPub, _ := signing.PublicKey()
	seed, _ := signing.Seed()
	k.signingSeed = string(seed)

	k.operator = jwt.NewOperatorClaims(opPub)
	k.operator.Name = "harness-dev"
	k.operator.SystemAccount = k.systemPub
	if _, err := k.operator.Encode(operator); err != nil { // fills in the claims' id and issuer
		return k, fmt.Errorf("signing the operator JWT: %w", err)
	}
	sys := jwt.NewAccountClaims(k.systemPub)
	sys.Name = "SYS"
	if k.systemJWT, err = sys.Encode(operator); err != nil {
		return k, fmt.Errorf("signing the system account JWT: %w", err)
	}
	acc := jwt.NewAccountClaims(k.accountPub)
	acc.Name = "harness"
	acc.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	clients, err := nkeys.CreateAccount()
	if err != nil {
		return k, err
	}
	k.clientsPub, _ = clients.PublicKey()
	cl := jwt.NewAccountClaims(k.clientsPub)
	cl.Name = "clients"
	cl.SigningKeys.Add(signingPub)
	for _, api := range natsturns.ConsumerAPI(natsturns.DefaultStream) {
		var typ jwt.ResponseType = jwt.ResponseTypeSingleton
		if api.Stream {
			typ = jwt.ResponseTypeStream // a pull request's answer is the messages it pulls
		}
		acc.Exports.Add(&jwt.Export{Name: api.Subject, Subject: jwt.Subject(api.Subject), Type: jwt.Service, ResponseType: typ})
		cl.Imports.Add(&jwt.Import{Name: api.Subject, Subject: jwt.Subject(api.Subject), LocalSubject: jwt.RenamingSubject(api.Local), Account: k.accountPub, Type: jwt.Service})
	}
	if k.accountJWT, err = acc.Encode(operator); err != nil {
		return k, fmt.Errorf("signing the harness account JWT: %w", err)
	}
	if k.clientsJWT, err = cl.Encode(operator); err != nil {
		return k, fmt.Errorf("signing the clients account JWT: %w", err)
	}

	user, err := nkeys.CreateUser()
	if err != nil {
		return k, err
	}
	userPub, _ := user.PublicKey()
	uc := jwt.NewUserClaims(userPub)
	uc.Name = "harness"
	token, err := uc.Encode(account)
	if err != nil {
		return k, fmt.Errorf("signing the harness user JWT: %w", err)
	}
	userSeed, _ := user.Seed()
	creds, err := jwt.FormatUserConfig(token, userSeed)
	k.harnessCreds = string(creds)
	return k, err
}

// freeRoutes reserves a route port per node of a cluster: JetStream clustering wants every
// node's routes configured when it starts. The ports are free when this returns, and taken
// moments later.
func freeRoutes(n int) ([]*url.URL, error) {
	if n == 1 {
		return nil, nil
	}
	var routes []*url.URL
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free route port: %w", err)
		}
		defer l.Close()
		routes = append(routes, &url.URL{Scheme: "nats", Host: l.Addr().String()})
	}
	return routes, nil
}

func (s *Server) startNode(i int, opts Options, k keys, routes []*url.URL) (*server.Server, error) {
	dir, err := os.MkdirTemp("", "natsserver-")
	if err != nil {
		return nil, err
	}
	s.dirs = append(s.dirs, dir)
	resolver := &server.MemAccResolver{}
	for pub, token := range map[string]string{k.systemPub: k.systemJWT, k.accountPub: k.accountJWT, k.clientsPub: k.clientsJWT} {
		if err := resolver.Store(pub, token); err != nil {
			return nil, err
		}
	}
	o := &server.Options{
		ServerName:       "harness-" + strconv.Itoa(i),
		Host:             "127.0.0.1",
		Port:             server.RANDOM_PORT,
		NoSigs:           true,
		NoLog:            opts.Logf == nil,
		TrustedOperators: []*jwt.OperatorClaims{k.operator},
		SystemAccount:    k.systemPub,
		AccountResolver:  resolver,
		JetStream:        true,
		StoreDir:         dir,
	}
	if opts.WebSocket {
		o.Websocket = server.WebsocketOpts{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoTLS: true}
	}
	if routes != nil {
		port, _ := strconv.Atoi(routes[i].Port())
		o.Cluster = server.ClusterOpts{Name: "harness-dev", Host: "127.0.0.1", Port: port}
		o.Routes = routes
	}
	node, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("configuring NATS node %d: %w", i, err)
	}
	if opts.Logf != nil {
		node.SetLogger(logger{logf: opts.Logf, prefix: o.ServerName + ": "}, false, false)
	}
	go node.Start()
	if !node.ReadyForConnections(readyWithin) {
		node.Shutdown()
		return nil, fmt.Errorf("NATS node %d did not take connections within %s", i, readyWithin)
	}
	return node, nil
}

// waitReady waits until JetStream answers the harness user, which in a cluster means it has a
// meta leader.
func (s *Server) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	nc, err := s.Connect(nats.Timeout(time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		attempt, stop := context.WithTimeout(ctx, time.Second)
		_, err = js.AccountInfo(attempt)
		stop()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("JetStream did not answer within %s: %w", readyWithin, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Connect connects to the nodes as the harness's publisher.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	auth, err := natslog.CredsAuth(s.HarnessCreds)
	if err != nil {
		return nil, err
	}
	opts = append([]nats.Option{auth, nats.Name("harness")}, opts...)
	nc, err := nats.Connect(strings.Join(s.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS as the harness: %w", err)
	}
	return nc, nil
}

// StopNode shuts node i down, as a failover test wants.
func (s *Server) StopNode(i int) {
	s.nodes[i].Shutdown()
	s.nodes[i].WaitForShutdown()
}

// Shutdown stops every node and removes their stores; it may be called again.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		var wg sync.WaitGroup
		for _, n := range s.nodes {
			wg.Go(func() {
				n.Shutdown()
				n.WaitForShutdown()
			})
		}
		wg.Wait()
		for _, d := range s.dirs {
			_ = os.RemoveAll(d)
		}
	})
}

// logger passes a node's notices, warnings and errors to Logf.
type logger struct {
	logf   func(format string, args ...any)
	prefix string
}

func (l logger) Noticef(format string, v ...any) { l.logf(l.prefix+format, v...) }
func (l logger) Warnf(format string, v ...any)   { l.logf(l.prefix+"warning: "+format, v...) }
func (l logger) Errorf(format string, v ...any)  { l.logf(l.prefix+"error: "+format, v...) }
func (l logger) Fatalf(format string, v ...any)  { l.logf(l.prefix+"fatal: "+format, v...) }
func (l logger) Debugf(string, ...any)           {}
func (l logger) Tracef(string, ...any)           {}
