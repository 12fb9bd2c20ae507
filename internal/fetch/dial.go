package fetch

import (
	"fmt"
	"net/netip"
	"syscall"
)

var (
	linkLocal4  = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6  = netip.MustParsePrefix("fe80::/10")
	ec2Metadata = netip.MustParseAddr("fd00:ec2::254")
)

// forbiddenAddr reports whether a crawl must not connect to addr: link-local
// addresses (where cloud metadata services live, 169.254.169.254 among them) and
// the EC2 IPv6 metadata address. IPv4-mapped IPv6 forms are unmapped first so
// ::ffff:169.254.169.254 is caught too.
func forbiddenAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	return linkLocal4.Contains(addr) || linkLocal6.Contains(addr.WithZone("")) || addr.WithZone("") == ec2Metadata
}

// controlForbidden is a net.Dialer.Control hook. It sees the resolved "ip:port"
// after socket() and before connect(), so returning an error means nothing is sent.
func controlForbidden(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP literal (should not happen after resolution): refuse rather
		// than guess.
		return fmt.Errorf("dial %s %s: %w: unparseable address", network, address, ErrForbiddenAddress)
	}
	if forbiddenAddr(ap.Addr()) {
		return fmt.Errorf("dial %s %s: %w", network, address, ErrForbiddenAddress)
	}
	return nil
}
