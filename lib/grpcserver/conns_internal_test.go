package grpcserver

import (
	"maps"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobplane/jobplane/lib/auth"
)

// addrConn is a connection with fixed TCP addresses that records its close.
type addrConn struct {
	net.Conn
	local, remote net.Addr
	closed        atomic.Bool
}

func (c *addrConn) LocalAddr() net.Addr  { return c.local }
func (c *addrConn) RemoteAddr() net.Addr { return c.remote }
func (c *addrConn) Close() error         { c.closed.Store(true); return nil }

// A connection accepted with the addresses of one the gate still holds
// (dead: a failed handshake gives no end to follow) takes its place: the
// transport's tag finds the new one, not the stale one.
func TestAConnectionTakesTheAddressesOfAStaleOne(t *testing.T) {
	cfg := Defaults("127.0.0.1:0", "")
	g := newConnGate(cfg, nil)
	local, remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2}
	stale, fresh := &addrConn{local: local, remote: remote}, &addrConn{local: local, remote: remote}
	g.accepted(stale)
	g.accepted(fresh)
	if gc := g.tracked(local, remote, "1"); gc == nil || gc.conn != fresh {
		t.Fatalf("the tag finds %v, want the fresh connection", gc)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !stale.closed.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !stale.closed.Load() || fresh.closed.Load() {
		t.Errorf("stale closed %v, fresh closed %v; want the stale one alone", stale.closed.Load(), fresh.closed.Load())
	}
	if n := g.unidentified.Len(); n != 1 {
		t.Errorf("%d unidentified connections, want 1", n)
	}
}

// At the bound, the gate closes an unidentified connection of the host
// holding the most, along any order of arrivals; an IPv6 network's /64 is
// one host.
func TestUnidentifiedConnectionsAreSharedFairlyByHost(t *testing.T) {
	hosts := []net.IP{net.IPv4(10, 0, 0, 1), net.IPv4(10, 0, 0, 2), net.ParseIP("2001:db8::1"), net.ParseIP("2001:db8::2"), net.ParseIP("2001:db9::1")}
	cfg := Defaults("127.0.0.1:0", "")
	cfg.MaxUnidentifiedConns = 6
	g := newConnGate(cfg, nil)
	local := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 443}
	for i := range 200 {
		ip := hosts[(i*7+i/3)%len(hosts)]
		c := &addrConn{local: local, remote: &net.TCPAddr{IP: ip, Port: 1000 + i}}
		g.mu.Lock()
		before := maps.Clone(g.hosts) // with c's
		g.mu.Unlock()
		before[auth.HostOf(ip)]++
		g.accepted(c)
		g.mu.Lock()
		held := g.unidentified.Len()
		var evicted string
		for host, n := range before {
			if n > g.hosts[host] {
				evicted = host
			}
		}
		g.mu.Unlock()
		if held > cfg.MaxUnidentifiedConns {
			t.Fatalf("arrival %d: %d unidentified connections held, bound %d", i, held, cfg.MaxUnidentifiedConns)
		}
		if evicted == "" {
			continue
		}
		for host, n := range before {
			if n > before[evicted] {
				t.Fatalf("arrival %d: a connection of %s closed (%d held) while %s held %d", i, evicted, before[evicted], host, n)
			}
		}
	}
	if got := auth.HostOf(net.ParseIP("2001:db8::2")); got != auth.HostOf(net.ParseIP("2001:db8::1")) || got != "2001:db8::/64" {
		t.Errorf("auth.HostOf(2001:db8::2) = %q, want the /64 of 2001:db8::1", got)
	}
}

// Of one host's connections, the gate closes one with no call open among
// the older half first, then one whose calls need no credentials, then its
// oldest, never the newest in its handshake: a host whose connections all
// wait on their reviews closes its own for a newcomer.
func TestTheConnectionEvictedLastIsOneBeingAuthenticated(t *testing.T) {
	cfg := Defaults("127.0.0.1:0", "")
	cfg.MaxUnidentifiedConns = 100
	g := newConnGate(cfg, nil)
	local := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 443}
	conns := make([]*gatedConn, 5)
	for i := range conns {
		remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1000 + i}
		g.accepted(&addrConn{local: local, remote: remote})
		conns[i] = g.byAddrs[addrsOf(local, remote)]
	}
	// Oldest first: one being authenticated, one in its handshake (no call
	// yet) among the older half, one being authenticated, one with a health
	// watch, and the newest, in its handshake.
	for _, i := range []int{0, 2} {
		conns[i].calls.Store(1)
		g.countOn(conns[i])
	}
	conns[3].calls.Store(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, want := range []int{1, 3, 0, 2} {
		if got := g.toEvict(); got != conns[want] {
			t.Fatalf("evicted %s, want connection %d", got.addrs, want)
		}
		g.closeLocked(conns[want], "test")
	}
}

// A call's count of authentication ends once, however often it is ended.
func TestAnAuthenticationIsCountedOnce(t *testing.T) {
	g := newConnGate(Defaults("127.0.0.1:0", ""), nil)
	gc := &gatedConn{}
	done := g.countOn(gc)
	g.countOn(gc)
	done()
	done()
	if n := gc.authenticating.Load(); n != 1 {
		t.Errorf("%d calls being authenticated, want 1", n)
	}
}
