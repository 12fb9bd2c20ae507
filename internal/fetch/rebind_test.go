package fetch

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// rebindingDNS is a DNS server on loopback whose A answer for every name changes after the first
// query: first a public address, then 127.0.0.1 — a site whose DNS answer turns into the worker's
// own loopback between two fetches. AAAA queries get no answer.
type rebindingDNS struct {
	mu      sync.Mutex
	queries int
	first   netip.Addr
}

func (d *rebindingDNS) serve(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if out, ok := d.answer(buf[:n]); ok {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

func (d *rebindingDNS) answer(req []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired})
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	if q.Type == dnsmessage.TypeA {
		d.mu.Lock()
		addr := netip.MustParseAddr("127.0.0.1")
		if d.queries == 0 {
			addr = d.first
		}
		d.queries++
		d.mu.Unlock()
		b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: addr.As4()})
	}
	out, err := b.Finish()
	return out, err == nil
}

// DNS rebinding: a name that resolved to a public address for one fetch resolves to 127.0.0.1 for
// the next. The guard judges the address each connection is about to use, not an earlier lookup,
// so the second fetch is refused and the loopback server records nothing. The public address is
// never connected to: the test's Control wrapper stops every dial the guard lets through.
func TestDNSRebindingRefused(t *testing.T) {
	t.Parallel()
	srv, hits := recorder(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dns := &rebindingDNS{first: netip.MustParseAddr("198.51.100.7")}
	dnsAddr := dns.serve(t)

	f, err := New(Config{ConnectTimeout: time.Minute, ReadTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := newDialer(f.cfg)
	guard := d.Control
	var mu sync.Mutex
	var dialed []string
	d.Control = func(network, address string, rc syscall.RawConn) error {
		mu.Lock()
		dialed = append(dialed, address)
		mu.Unlock()
		if err := guard(network, address, rc); err != nil {
			return err
		}
		return errNeverConnect
	}
	d.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "udp", dnsAddr)
	}}
	f.transport.DialContext = d.DialContext

	u := "http://rebind.test:" + port + "/2018-06-01/runtime/invocation/next"
	if _, err := f.Fetch(context.Background(), u); !errors.Is(err, errNeverConnect) {
		t.Fatalf("first fetch (public answer): %v; want the guard to let it through to the test's stop", err)
	}
	_, err = f.Fetch(context.Background(), u)
	var re *RefusedError
	if !errors.As(err, &re) || re.Class != "loopback" {
		t.Fatalf("second fetch (answer now 127.0.0.1): %v; want a loopback *RefusedError", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback server got %d requests after the DNS answer changed", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialed) < 2 || !strings.HasPrefix(dialed[0], "198.51.100.7:") || !strings.HasPrefix(dialed[len(dialed)-1], "127.0.0.1:") {
		t.Errorf("Control saw %v; want the public address, then 127.0.0.1", dialed)
	}
}
