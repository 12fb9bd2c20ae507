package docscheck

import (
	"strings"
	"testing"
)

func TestBlocksReadsDirectives(t *testing.T) {
	md := strings.Join([]string{
		"# T",
		"```sh",
		"echo one",
		"```",
		"<!-- docs-check: skip needs AWS -->",
		"```sh",
		"aws lambda invoke",
		"```",
		"```yaml",
		"a: b",
		"```",
		"<!-- docs-check: run curl -s localhost -->",
		"- a list item:",
		"  <!-- docs-check: flags -->",
		"  ```sh",
		"  crawlq bench --jobs 10",
		"  ```",
	}, "\n")
	got, err := Blocks(md)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 2, Mode: Run, Text: "echo one\n"},
		{Line: 6, Mode: Skip, Reason: "needs AWS", Text: "aws lambda invoke\n"},
		{Line: 12, Mode: Run, Text: "curl -s localhost\n", Hidden: true},
		{Line: 15, Mode: Flags, Text: "crawlq bench --jobs 10\n"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestBlocksRefusesBadDirectives(t *testing.T) {
	for _, md := range []string{
		"<!-- docs-check: skip -->\n```sh\nx\n```\n",           // no reason
		"<!-- docs-check: skip why -->\ntext\n```sh\nx\n```\n", // not right before
		"<!-- docs-check: skip why -->\n```yaml\nx\n```\n",     // not a sh block
		"<!-- docs-check: sometimes -->\n```sh\nx\n```\n",      // unknown
		"<!-- docs-check: flags -->\n",                         // nothing follows
		"```sh\nnever closed\n",                                // open block
		"<!-- docs-check: run -->\n",                           // no command
	} {
		if _, err := Blocks(md); err == nil {
			t.Errorf("accepted %q", md)
		}
	}
}

func TestFlagChecks(t *testing.T) {
	got := FlagChecks("bin/crawlq bench --jobs 100000   # a comment\nROUNDS=9 make bench-crawl\nscripts/bench-queue.sh\ngo test -run XXX -bench . ./internal/queue\nbin/crawlq bench --op dbcost; scripts/bench-dbcost.sh 100000\n")
	want := []string{
		"bin/crawlq bench --jobs 100000 --help >/dev/null",
		"make -n bench-crawl >/dev/null",
		"test -x scripts/bench-queue.sh",
		"go test -run XXX -bench . ./internal/queue -list . >/dev/null",
		"bin/crawlq bench --op dbcost --help >/dev/null",
		"test -x scripts/bench-dbcost.sh",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAnchorsAndLinks(t *testing.T) {
	md := "# The api's actions (`internal/api`)\n## Retry\n## Retry\n[a](docs/x.md#y) [b](#retry-1) `[c](nope.md)` [d](https://x.example/)\n```\n[e](f.md)\n```\n"
	a := Anchors(md)
	for _, want := range []string{"the-apis-actions-internalapi", "retry", "retry-1"} {
		if !a[want] {
			t.Errorf("no anchor %q in %v", want, a)
		}
	}
	links := Links(md)
	if len(links) != 2 || links[0] != (Link{Line: 4, Target: "docs/x.md", Anchor: "y"}) || links[1] != (Link{Line: 4, Anchor: "retry-1"}) {
		t.Errorf("links %+v", links)
	}
}

func TestStrictFailsAnAndList(t *testing.T) {
	got := Strict("false && true   # a comment\ncat <<'EOF'\nx && y\nEOF\nsleep 1 && echo &\na && \\\n  b\n")
	want := "false && true   # a comment\nrc=$?; [ $rc -eq 0 ] || exit $rc\ncat <<'EOF'\nx && y\nEOF\nsleep 1 && echo &\na && \\\n  b\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
