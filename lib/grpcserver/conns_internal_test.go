package grpcserver

import (
	"net"
	"sync/atomic"
	"testing"
	"time"
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
