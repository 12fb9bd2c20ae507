package crawl_test

import (
	"flag"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// minParallel is how many of this package's tests run at once when -parallel is not given: at
// least this many, where go test's default is GOMAXPROCS (2 on the CI machine). These tests
// spend their time waiting far more than computing: realtime_test.go's runs last a minute of host
// pauses each at the spider's defaults, and others wait on Chromium, on processes they kill and
// on Postgres. Two at a time they queued behind each other (54 s of CPU in a 199 s run on a quiet
// machine, the longest package of make test). Not more than 4: eight at once, several of them
// driving Chromium, ran a rendered crawl past its two-minute wait on a loaded machine.
const minParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(minParallel, runtime.GOMAXPROCS(0)))); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
