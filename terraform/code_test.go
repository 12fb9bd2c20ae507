package terraform_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"crawlq/internal/awspolicy"
)

// functionCode is what codeProblems reads of a plan: the code bucket's name, and by function
// (api, worker, ...) its planned attributes and those of its code object.
type functionCode struct {
	bucket    string
	functions map[string]map[string]any
	objects   map[string]map[string]any
}

// planFunctionCode collects the functions, their code objects and the code bucket from a plan.
func planFunctionCode(plan *tfjson.Plan) functionCode {
	c := functionCode{functions: map[string]map[string]any{}, objects: map[string]map[string]any{}}
	for _, b := range resources(plan, "aws_s3_bucket") {
		if strings.HasSuffix(b.Address, ".code") {
			c.bucket, _ = b.AttributeValues["bucket"].(string)
		}
	}
	for _, f := range resources(plan, "aws_lambda_function") {
		c.functions[fmt.Sprint(f.Index)] = f.AttributeValues
	}
	for _, o := range resources(plan, "aws_s3_object") {
		c.objects[fmt.Sprint(o.Index)] = o.AttributeValues
	}
	return c
}

// codeProblems checks where the functions' code comes from: every function is created from its
// zip in the stack's code bucket (s3_bucket and s3_key; never from a local file, `filename`,
// which the AWS provider creates one function at a time under a lock), and that object is the
// zip it names, uploaded under a key named by the zip's SHA-256, so that a changed zip is a new
// key, which updates the function's code. The zips are read from where the plan's objects say.
func codeProblems(c functionCode) []string {
	var out []string
	if c.bucket == "" {
		out = append(out, "no code bucket (module.storage.aws_s3_bucket.code) in the plan")
	}
	if len(c.functions) != 5 {
		out = append(out, fmt.Sprintf("%d functions in the plan, want 5", len(c.functions)))
	}
	for _, fn := range slices.Sorted(maps.Keys(c.functions)) {
		f, o := c.functions[fn], c.objects[fn]
		if name, _ := f["filename"].(string); name != "" {
			out = append(out, fmt.Sprintf("function %s is created from a local file (filename = %s), not from the code bucket", fn, name))
		}
		if o == nil {
			out = append(out, fmt.Sprintf("function %s has no code object (aws_s3_object.code[%q])", fn, fn))
			continue
		}
		src, _ := o["source"].(string)
		zip, err := os.ReadFile(src)
		if err != nil {
			out = append(out, fmt.Sprintf("function %s: read its zip: %v", fn, err))
			continue
		}
		sum := sha256.Sum256(zip)
		wantKey := fmt.Sprintf("functions/%s/%x.zip", fn, sum)
		if !strings.HasSuffix(src, "/"+fn+".zip") || o["bucket"] != c.bucket || o["key"] != wantKey {
			out = append(out, fmt.Sprintf("function %s: code object s3://%v/%v from %s, want s3://%s/%s from its own zip", fn, o["bucket"], o["key"], src, c.bucket, wantKey))
		}
		if f["s3_bucket"] != c.bucket || f["s3_key"] != wantKey {
			out = append(out, fmt.Sprintf("function %s: code from s3://%v/%v, want s3://%s/%s", fn, f["s3_bucket"], f["s3_key"], c.bucket, wantKey))
		}
		if want := base64.StdEncoding.EncodeToString(sum[:]); f["source_code_hash"] != want {
			out = append(out, fmt.Sprintf("function %s: source_code_hash %v, want the zip's %s", fn, f["source_code_hash"], want))
		}
	}
	return out
}

// codeBucketProblems evaluates the code bucket's policy (policy; "" when the plan has none): it
// refuses every request that is not over TLS.
func codeBucketProblems(policy, codeARN string) []string {
	if policy == "" {
		return []string{"the code bucket has no policy: it takes requests that are not over TLS"}
	}
	pol, err := awspolicy.Parse(policy)
	if err != nil {
		return []string{fmt.Sprintf("code bucket policy: %v", err)}
	}
	var out []string
	for _, action := range []string{"s3:GetObject", "s3:PutObject"} {
		r := awspolicy.Request{Principal: awspolicy.Principal{AWS: "arn:aws:iam::123456789012:role/deployer"}, Action: action,
			Resource: codeObject(codeARN), Context: map[string]string{"aws:SecureTransport": "false"}}
		if d := pol.Evaluate(r); d != awspolicy.ExplicitDeny {
			out = append(out, fmt.Sprintf("code bucket policy: %s without TLS: %v, want an explicit deny", action, d))
		}
	}
	return out
}

// codeObject is a code object's ARN in the bucket codeARN: migrate's, the one that matters most.
func codeObject(codeARN string) string { return codeARN + "/functions/migrate/0123abcd.zip" }

// codeRoleProblems evaluates every role's policies (roles: each role's documents): none may
// write, delete or read the functions' code in the bucket codeARN, or change the bucket's
// policy. A role that could write migrate's zip would run its code as the database's master
// user at the next deploy.
func codeRoleProblems(codeARN string, roles map[string][]string) []string {
	var out []string
	for _, role := range slices.Sorted(maps.Keys(roles)) {
		for _, doc := range roles[role] {
			pol, err := awspolicy.Parse(doc)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %v", role, err))
				continue
			}
			for _, r := range []awspolicy.Request{
				{Action: "s3:PutObject", Resource: codeObject(codeARN)},
				{Action: "s3:DeleteObject", Resource: codeObject(codeARN)},
				{Action: "s3:GetObject", Resource: codeObject(codeARN)},
				{Action: "s3:PutBucketPolicy", Resource: codeARN},
				{Action: "s3:DeleteBucketPolicy", Resource: codeARN},
			} {
				if pol.Allows(r) {
					out = append(out, fmt.Sprintf("%s may %s %s", role, r.Action, r.Resource))
				}
			}
		}
	}
	return out
}

// checkFunctionCode runs codeProblems and codeBucketProblems on a plan. The code bucket's policy
// is checked in the configuration real AWS gets; emulator_workarounds leaves it out (the
// variable says why).
func checkFunctionCode(t *testing.T, plan *tfjson.Plan) {
	t.Helper()
	c := planFunctionCode(plan)
	for _, p := range codeProblems(c) {
		t.Error(p)
	}
	var codeARN, codeID string
	for _, b := range resources(plan, "aws_s3_bucket") {
		if strings.HasSuffix(b.Address, ".code") {
			codeARN, codeID = str(t, b, "arn"), str(t, b, "id")
		}
	}
	policy := ""
	for _, p := range resources(plan, "aws_s3_bucket_policy") {
		if p.AttributeValues["bucket"] == codeID {
			policy = str(t, p, "policy")
		}
	}
	if v := plan.Variables["emulator_workarounds"]; v != nil && fmt.Sprint(v.Value) == "true" {
		if policy != "" {
			t.Errorf("with emulator_workarounds the code bucket still has its policy, which moto applies to Terraform's own upload")
		}
	} else {
		for _, p := range codeBucketProblems(policy, codeARN) {
			t.Error(p)
		}
	}
	roles := map[string][]string{}
	for _, p := range resources(plan, "aws_iam_role_policy") {
		role := str(t, p, "role")
		roles[role] = append(roles[role], str(t, p, "policy"))
	}
	for _, p := range codeRoleProblems(codeARN, roles) {
		t.Error(p)
	}
}

// TestCodeChecks shows codeProblems failing on the functions as they were built before the code
// bucket (from a local file) and on a key that does not follow the zip, and codeBucketProblems
// failing on code kept in the items bucket, which the worker may write, and on a bucket without
// the TLS-only policy.
func TestCodeChecks(t *testing.T) {
	dir := dummyZips(t)
	good := functionCode{bucket: "crawlq-code-123456789012", functions: map[string]map[string]any{}, objects: map[string]map[string]any{}}
	old := functionCode{functions: map[string]map[string]any{}}
	for _, fn := range []string{"api", "worker", "dispatch", "metrics", "migrate"} {
		zip := dir + "/" + fn + ".zip"
		b, err := os.ReadFile(zip)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		key := fmt.Sprintf("functions/%s/%x.zip", fn, sum)
		hash := base64.StdEncoding.EncodeToString(sum[:])
		good.functions[fn] = map[string]any{"s3_bucket": good.bucket, "s3_key": key, "source_code_hash": hash}
		good.objects[fn] = map[string]any{"bucket": good.bucket, "key": key, "source": zip}
		old.functions[fn] = map[string]any{"filename": zip, "source_code_hash": hash}
	}
	if got := codeProblems(good); len(got) != 0 {
		t.Errorf("functions from their content-addressed objects: %q", got)
	}
	got := strings.Join(codeProblems(old), "\n")
	if !strings.Contains(got, "no code bucket") || !strings.Contains(got, "function migrate is created from a local file") {
		t.Errorf("functions from local files passed: %q", got)
	}
	// A key that stays when the zip changes (the function's code would never update).
	fixed := good
	fixed.objects = map[string]map[string]any{}
	for fn, o := range good.objects {
		fixed.objects[fn] = map[string]any{"bucket": o["bucket"], "key": "functions/" + fn + ".zip", "source": o["source"]}
	}
	if got := strings.Join(codeProblems(fixed), "\n"); !strings.Contains(got, "function api: code object s3://crawlq-code-123456789012/functions/api.zip") {
		t.Errorf("a key that does not follow the zip passed: %q", got)
	}

	const (
		code  = "arn:aws:s3:::crawlq-code-123456789012"
		items = "arn:aws:s3:::crawlq-items-123456789012"
	)
	tlsOnly := func(arn string) string {
		return `{"Statement":[{"Sid":"DenyInsecureTransport","Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["` + arn + `","` + arn + `/*"],"Condition":{"Bool":{"aws:SecureTransport":"false"}}}]}`
	}
	// The worker's grant on the items bucket (terraform/main.tf, data.aws_iam_policy_document.items).
	worker := map[string][]string{"crawlq-worker": {`{"Statement":[{"Effect":"Allow","Action":["s3:PutObject","s3:GetObject"],"Resource":"` + items + `/*"},{"Effect":"Allow","Action":"s3:ListBucket","Resource":"` + items + `"}]}`}}
	if got := append(codeBucketProblems(tlsOnly(code), code), codeRoleProblems(code, worker)...); len(got) != 0 {
		t.Errorf("a TLS-only code bucket of its own: %q", got)
	}
	if got := strings.Join(codeRoleProblems(items, worker), "\n"); !strings.Contains(got, "crawlq-worker may s3:PutObject "+items+"/functions/migrate/") {
		t.Errorf("code in the items bucket, which the worker writes, passed: %q", got)
	}
	if got := strings.Join(codeBucketProblems("", code), "\n"); !strings.Contains(got, "no policy") {
		t.Errorf("a code bucket without a policy passed: %q", got)
	}
	allowAll := `{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"` + code + `/*"}]}`
	if got := strings.Join(codeBucketProblems(allowAll, code), "\n"); !strings.Contains(got, "s3:GetObject without TLS: allow") {
		t.Errorf("a code bucket policy without the TLS deny passed: %q", got)
	}
}
