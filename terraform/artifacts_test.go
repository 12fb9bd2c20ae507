package terraform_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"crawlq/internal/artifact"
	"crawlq/internal/awspolicy"
)

// The runner task keeps the screenshots and HTML of failed rendered pages in the items bucket
// (internal/artifact's S3 store, under artifact.Prefix), and may do nothing else there: the
// check below evaluates its identity policy (internal/awspolicy) for what the store does, on the
// plan of the stack (checkDatabaseAccess) and, in TestRunnerArtifactGrantChecks, on grants a
// stack could get wrong.

// runnerArtifactProblems evaluates the runner task's policy doc: with runner_items_to_s3 it may
// put a run's artifacts (artifact.Prefix + "runs/<run>/<file>"), without it not; it may never
// read, delete or list them, nor put objects beside the prefix (a key that only starts alike,
// the bucket's root, another prefix).
func runnerArtifactProblems(doc, bucketARN string, runnerItems bool) []string {
	pol, err := awspolicy.Parse(doc)
	if err != nil {
		return []string{fmt.Sprintf("crawlq-runner-task: %v", err)}
	}
	var out []string
	for _, file := range []string{"page-2002-1.png", "page-2002-1.html"} {
		key := bucketARN + "/" + artifact.Prefix + "runs/7/" + file
		if got := pol.Allows(awspolicy.Request{Action: "s3:PutObject", Resource: key}); got != runnerItems {
			out = append(out, fmt.Sprintf("crawlq-runner-task: puts failed pages' files (%s) = %v, want %v (runner_items_to_s3)", key, got, runnerItems))
		}
		for _, action := range []string{"s3:GetObject", "s3:DeleteObject"} {
			if pol.Allows(awspolicy.Request{Action: action, Resource: key}) {
				out = append(out, fmt.Sprintf("crawlq-runner-task may %s %s", action, key))
			}
		}
	}
	for _, key := range []string{strings.TrimSuffix(artifact.Prefix, "/") + "-other/x", "x.png", "runs/7/page-1-1.png", "scrapyd-answers/x"} {
		if pol.Allows(awspolicy.Request{Action: "s3:PutObject", Resource: bucketARN + "/" + key}) {
			out = append(out, fmt.Sprintf("crawlq-runner-task may s3:PutObject %s/%s, beside %s", bucketARN, key, artifact.Prefix))
		}
	}
	if pol.Allows(awspolicy.Request{Action: "s3:ListBucket", Resource: bucketARN}) {
		out = append(out, "crawlq-runner-task may s3:ListBucket "+bucketARN)
	}
	return out
}

// TestRunnerArtifactGrantChecks shows the check failing on a runner policy without the
// artifacts grant, with too broad a one (the whole bucket, a prefix without its slash, reads and
// deletes), and with it while runner_items_to_s3 is off; and passing on the stack's own grant
// (terraform/main.tf's WriteItemsAndFailedPages).
func TestRunnerArtifactGrantChecks(t *testing.T) {
	t.Parallel()
	bucket := "arn:aws:s3:::crawlq-items-123456789012"
	put := func(actions string, resources ...string) string {
		return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":` + actions + `,"Resource":["` + strings.Join(resources, `","`) + `"]}]}`
	}
	stack := put(`"s3:PutObject"`, bucket+"/items/*", bucket+"/artifacts/*")
	for _, c := range []struct {
		name, doc string
		items     bool
		want      string // "" for no problem
	}{
		{"the stack's grant", stack, true, ""},
		{"no items to S3, no grant", `{"Version":"2012-10-17","Statement":[]}`, false, ""},
		{"missing", put(`"s3:PutObject"`, bucket+"/items/*"), true, "puts failed pages' files"},
		{"granted without runner_items_to_s3", stack, false, "puts failed pages' files"},
		{"the whole bucket", put(`"s3:PutObject"`, bucket+"/*"), true, "beside artifacts/"},
		{"a prefix without its slash", put(`"s3:PutObject"`, bucket+"/items/*", bucket+"/artifacts*"), true, "artifacts-other"},
		{"reads too", put(`["s3:PutObject","s3:GetObject"]`, bucket+"/artifacts/*"), true, "may s3:GetObject"},
		{"deletes too", put(`"s3:*"`, bucket+"/artifacts/*"), true, "may s3:DeleteObject"},
		{"lists", put(`["s3:PutObject","s3:ListBucket"]`, bucket+"/artifacts/*", bucket), true, "may s3:ListBucket"},
	} {
		got := runnerArtifactProblems(c.doc, bucket, c.items)
		if c.want == "" && len(got) > 0 || c.want != "" && !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
			t.Errorf("%s: problems %q, want one containing %q", c.name, got, c.want)
		}
	}
}
