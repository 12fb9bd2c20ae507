package envconfig_test

import (
	"maps"
	"testing"

	"crawlq/internal/envconfig"
)

// TestProxyEnvTakesTheProxyPrefixOnly: only CRAWLQ_PROXY_* variables reach crawl.Config.ProxyEnv,
// so a spec's proxy URL cannot carry another variable (the database URL) to a proxy.
func TestProxyEnvTakesTheProxyPrefixOnly(t *testing.T) {
	t.Parallel()
	got := envconfig.ProxyEnv([]string{"CRAWLQ_PROXY_ALICE=pw=1", "DATABASE_URL=postgres://x", "CRAWLQ_PROXY=no", "CRAWLQ_PROXY_B="})
	want := map[string]string{"CRAWLQ_PROXY_ALICE": "pw=1", "CRAWLQ_PROXY_B": ""}
	if !maps.Equal(got, want) {
		t.Fatalf("ProxyEnv = %v, want %v", got, want)
	}
}
