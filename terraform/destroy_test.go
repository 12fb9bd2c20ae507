package terraform_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// awsCLI runs the real aws CLI against the emulator the test's environment points at, and
// decodes its JSON answer into out (when not nil).
func awsCLI(t *testing.T, ctx context.Context, out any, args ...string) {
	t.Helper()
	awsCLIs(t, ctx, []awsCall{{out, args}})
}

// awsCall is one aws CLI command and where its JSON answer goes (out may be nil).
type awsCall struct {
	out  any
	args []string
}

// awsCLIs runs the calls side by side, as awsCLI runs one, and fails the test on the first
// call (in order) that failed.
func awsCLIs(t *testing.T, ctx context.Context, calls []awsCall) {
	t.Helper()
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Go(func() { errs[i] = runAWS(ctx, c.out, c.args) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func runAWS(ctx context.Context, out any, args []string) error {
	// --endpoint-url explicitly: this aws CLI ignores AWS_ENDPOINT_URL for some services (rds).
	cmd := exec.CommandContext(ctx, "aws", append(args, "--output", "json", "--endpoint-url", os.Getenv("AWS_ENDPOINT_URL"))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("aws %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("aws %s: decode %q: %w", strings.Join(args, " "), b, err)
		}
	}
	return nil
}

// fill leaves in the account what a default deploy and a crawl leave: an image in the
// repository repo and items, in several versions, in the versioned bucket.
//
// The image goes in through the ECR API, as a push does (the emulator has no registry to push
// layers to): a manifest naming a config and a layer. The items are written as a crawl does,
// one of them twice (so the bucket holds an old version too). moto evaluates the bucket's
// TLS-only policy, and its endpoint is plain HTTP, so the policy is lifted for the writes (as
// if they came over TLS) and put back as it was.
//
// Calls that do not depend on each other run side by side (each aws CLI call spends most of
// its time starting Python): five rounds instead of nine calls one after the other.
func fill(t *testing.T, ctx context.Context, repo, bucket string) {
	t.Helper()
	dir := t.TempDir()
	digest := func(s string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s))) }
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "size": 6, "digest": digest("config")},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 5, "digest": digest("layer")}},
	})
	mf := filepath.Join(dir, "manifest.json")
	items := filepath.Join(dir, "items.jl")
	if err := errors.Join(os.WriteFile(mf, manifest, 0o600), os.WriteFile(items, []byte(`{"title":"a"}`+"\n"), 0o600)); err != nil {
		t.Fatal(err)
	}
	var pol struct{ Policy string }
	awsCLIs(t, ctx, []awsCall{
		{nil, []string{"ecr", "put-image", "--repository-name", repo, "--image-tag", "latest", "--image-manifest", "file://" + mf}},
		{&pol, []string{"s3api", "get-bucket-policy", "--bucket", bucket}},
	})
	pf := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(pf, []byte(pol.Policy), 0o600); err != nil {
		t.Fatal(err)
	}
	var imgs struct{ ImageIds []any }
	awsCLIs(t, ctx, []awsCall{
		{&imgs, []string{"ecr", "list-images", "--repository-name", repo}},
		{nil, []string{"s3api", "delete-bucket-policy", "--bucket", bucket}},
	})
	if len(imgs.ImageIds) == 0 {
		t.Fatalf("no image in %s after put-image", repo)
	}
	var puts []awsCall
	for _, key := range []string{"items/demo/1/part-0001.jl", "items/demo/1/part-0002.jl", "items/demo/1/part-0001.jl"} {
		puts = append(puts, awsCall{nil, []string{"s3api", "put-object", "--bucket", bucket, "--key", key, "--body", items}})
	}
	awsCLIs(t, ctx, puts)
	var v struct{ Versions []any }
	awsCLI(t, ctx, &v, "s3api", "list-object-versions", "--bucket", bucket)
	if len(v.Versions) < 3 {
		t.Fatalf("bucket %s holds %d versions, want 3", bucket, len(v.Versions))
	}
	awsCLI(t, ctx, nil, "s3api", "put-bucket-policy", "--bucket", bucket, "--policy", "file://"+pf)
}

// afterDestroy lists what the emulated account still holds of the kinds the stack creates, and
// the names of its manual DB snapshots. The aws CLI calls run side by side: each one spends a
// second or more starting Python.
func afterDestroy(t *testing.T, ctx context.Context) (left, snaps []string) {
	t.Helper()
	var (
		repos   struct{ Repositories []any }
		buckets struct{ Buckets []any }
		dbs     struct{ DBInstances []any }
		fns     struct{ Functions []any }
		secrets struct{ SecretList []any }
		topics  struct{ Topics []any }
		vpcs    struct{ Vpcs []struct{ IsDefault bool } }
		s       dbSnapshots
	)
	awsCLIs(t, ctx, []awsCall{
		{&repos, []string{"ecr", "describe-repositories"}},
		{&buckets, []string{"s3api", "list-buckets"}},
		{&dbs, []string{"rds", "describe-db-instances"}},
		{&fns, []string{"lambda", "list-functions"}},
		{&secrets, []string{"secretsmanager", "list-secrets"}},
		{&topics, []string{"sns", "list-topics"}},
		{&vpcs, []string{"ec2", "describe-vpcs"}},
		{&s, []string{"rds", "describe-db-snapshots"}},
	})
	count := func(what string, n int) {
		if n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, what))
		}
	}
	count("ECR repositories", len(repos.Repositories))
	count("S3 buckets", len(buckets.Buckets))
	count("DB instances", len(dbs.DBInstances))
	count("Lambda functions", len(fns.Functions))
	count("secrets", len(secrets.SecretList))
	count("SNS topics", len(topics.Topics))
	n := 0
	for _, v := range vpcs.Vpcs {
		if !v.IsDefault {
			n++
		}
	}
	count("VPCs", n)
	return left, s.names()
}

// dbSnapshots is the answer of aws rds describe-db-snapshots.
type dbSnapshots struct {
	DBSnapshots []struct{ DBSnapshotIdentifier string }
}

func (s dbSnapshots) names() []string {
	var out []string
	for _, x := range s.DBSnapshots {
		out = append(out, x.DBSnapshotIdentifier)
	}
	return out
}

// snapshots returns the names of the account's manual DB snapshots.
func snapshots(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var s dbSnapshots
	awsCLI(t, ctx, &s, "rds", "describe-db-snapshots")
	return s.names()
}
