package crawl_test

import (
	"context"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
