package fetch

import (
	"fmt"
	"net/netip"
	"syscall"
)

// A range of addresses that are not the public internet, and what to call them in an error.
type addrRange struct {
	prefix netip.Prefix
	class  string
}

// nonPublic lists the ranges a crawl does not connect to unless allowed, most specific first
// (the metadata addresses sit inside the link-local and unique-local ranges), so the first match
// names the address best. From a Lambda function or an ECS task these reach the function's own
// runtime API (127.0.0.1:9001), the instance or task metadata and its credentials, and every
// service of the VPC (the database proxy among them).
var nonPublic = []addrRange{
	{netip.MustParsePrefix("169.254.169.254/32"), "cloud metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	// Connecting to 0.0.0.0 or :: reaches this machine's own listeners.
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (CGNAT)"},
	{netip.MustParsePrefix("fc00::/7"), "unique local"},
	// Not the internet either: the benchmarking range, which a VPC may number its subnets
	// from (as it may CGNAT's); IETF protocol assignments; multicast; the reserved 240/4 and the
	// broadcast address in it.
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("192.0.0.0/24"), "special-purpose"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// nat64 is the well-known NAT64 prefix (RFC 6052): 64:ff9b::a00:5 is 10.0.0.5 translated by a
// NAT64 gateway (a VPC's NAT gateway does it), so the IPv4 address inside is what is reached.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// classify names the non-public range addr falls in, or "" for a public address. IPv4-mapped
// (::ffff:127.0.0.1) and NAT64 forms are judged by the IPv4 address inside them.
func classify(addr netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, r := range nonPublic {
		if r.prefix.Contains(addr) {
			return r.class
		}
	}
	return ""
}

// RefusedError is the error of a connection the address guard refused before it was made:
// Addr is not a public address and the fetcher was not allowed to reach its kind. It matches
// ErrForbiddenAddress.
type RefusedError struct {
	Addr  netip.Addr
	Class string // "loopback", "private", "cloud metadata", ...
	Proxy bool   // the address is a proxy's (Config.Proxy), judged by the proxies' rule
}

func (e *RefusedError) Error() string {
	if e.Proxy {
		hint := "a proxy may be on a public or private (VPC) address"
		if e.Class == "loopback" {
			hint += ", on loopback only for a local worker with --allow-loopback"
		}
		return fmt.Sprintf("refused: proxy address %s is a %s address; %s", e.Addr, e.Class, hint)
	}
	hint := "set allow_private: true in the spider to crawl it"
	if e.Class == "loopback" {
		hint += " (or, for a site on this machine, --allow-loopback on crawlq worker, local or spider test)"
	}
	return fmt.Sprintf("refused: %s is a %s address; %s", e.Addr, e.Class, hint)
}

// Is makes errors.Is(err, ErrForbiddenAddress) true for a refusal.
func (e *RefusedError) Is(target error) bool { return target == ErrForbiddenAddress }

// guard decides, for each connection the fetcher is about to make, whether its address may be
// reached (Config.AllowPrivate and AllowLoopback).
type guard struct {
	allowLoopback bool
}

// check returns a *RefusedError for an address the fetcher must not connect to.
func (g guard) check(addr netip.Addr) error {
	class := classify(addr)
	if class == "" || (class == "loopback" && g.allowLoopback) {
		return nil
	}
	return &RefusedError{Addr: addr.Unmap(), Class: class}
}

// control is a net.Dialer.Control hook. It sees the resolved "ip:port" after socket() and before
// connect(), so a refusal means nothing is sent; and it runs for every connection, so neither a
// redirect nor a DNS answer that changes between lookups (DNS rebinding) gets past it.
func (g guard) control(network, address string, _ syscall.RawConn) error {
	addr, err := dialedAddr("dial", network, address)
	if err != nil {
		return err
	}
	return g.check(addr)
}

// dialedAddr is the IP of a Control hook's resolved "ip:port". Not an IP literal (should not
// happen after resolution): refused rather than guessed at.
func dialedAddr(what, network, address string) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s %s %s: %w: unparseable address", what, network, address, ErrForbiddenAddress)
	}
	return ap.Addr(), nil
}

// CheckAddr is the fetcher's address guard for other packages that connect on a crawl's behalf
// (the browser pool's requests): nil when addr may be reached under allowLoopback/allowPrivate
// (as Config.AllowLoopback/AllowPrivate), else a *RefusedError matching ErrForbiddenAddress.
func CheckAddr(addr netip.Addr, allowLoopback, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	return guard{allowLoopback: allowLoopback}.check(addr)
}

// DialControl is the fetcher's net.Dialer.Control hook for the same packages: it judges each
// connection's resolved address after socket() and before connect(); nil when allowPrivate.
func DialControl(allowLoopback, allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	if allowPrivate {
		return nil
	}
	return guard{allowLoopback: allowLoopback}.control
}
