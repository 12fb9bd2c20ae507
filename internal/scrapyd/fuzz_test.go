package scrapyd

import (
	"net/url"
	"testing"

	"crawlq/internal/spiderstore"
)

// FuzzRequest feeds arbitrary forms (and eggs) to every endpoint's request builder, and eggs to
// the egg checks: none may panic, and a request that passes must also pass the api's validation.
func FuzzRequest(f *testing.F) {
	f.Add("project=catalog&spider=books&setting=DOWNLOAD_DELAY=2&setting=X&jobid=j1&priority=3&a=b", []byte("PK\x03\x04"))
	f.Add("project=&spider=&priority=1e400&_version=..%00&job=-1", []byte{})
	f.Add("job=12345678901234567890&project=a%2Fb&version=v1", []byte("not a zip"))
	f.Fuzz(func(t *testing.T, query string, egg []byte) {
		form, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		for _, ep := range endpoints {
			req, err := request(ep.action, form, map[string][]byte{"egg": egg})
			if err == nil && req.Validate() != nil {
				t.Fatalf("%s: request passed but does not validate", ep.action)
			}
		}
		_, _ = spiderstore.ParseEgg(egg)
		_, _ = spiderstore.StaticLister{}.List(t.Context(), egg, spiderstore.EggInfo{})
	})
}
