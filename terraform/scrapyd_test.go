package terraform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"crawlq/internal/awspolicy"
	"crawlq/internal/awstest"
	"crawlq/internal/envconfig"
	"crawlq/internal/scrapyd"
)

// checkNoSecretsInState reads every secret the apply left in the emulator and fails if a
// password of one of them appears in the state file: they are written write-only
// (secret_string_wo) from ephemeral values, so the state never holds them.
func checkNoSecretsInState(t *testing.T, ctx context.Context, statePath string) {
	t.Helper()
	state, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ SecretList []struct{ ARN, Name string } }
	awsCLI(t, ctx, &list, "secretsmanager", "list-secrets")
	values := make([]struct{ SecretString string }, len(list.SecretList))
	var gets []awsCall
	for i, s := range list.SecretList {
		gets = append(gets, awsCall{&values[i], []string{"secretsmanager", "get-secret-value", "--secret-id", s.ARN}})
	}
	awsCLIs(t, ctx, gets)
	checked := 0
	for i, s := range list.SecretList {
		var c struct{ Password string }
		if json.Unmarshal([]byte(values[i].SecretString), &c) != nil || c.Password == "" {
			continue
		}
		checked++
		if strings.Contains(string(state), c.Password) {
			t.Errorf("the state holds the password of secret %s", s.Name)
		}
	}
	if checked < 2 {
		t.Errorf("checked %d secrets' passwords against the state, want the application role's and the Scrapyd API's", checked)
	}
}

// checkFunctionURLPolicy evaluates the api function's resource policy as applied: the public
// may invoke it through its NONE function URL (lambda:InvokeFunctionUrl, and
// lambda:InvokeFunction via the URL), and nobody may invoke it directly, past the basic auth.
// moto records a permission's FunctionUrlAuthType and InvokedViaFunctionUrl as statement
// fields; AWS writes them as the conditions they are, so they are turned into those first.
func checkFunctionURLPolicy(t *testing.T, ctx context.Context, fn string) {
	t.Helper()
	var got struct{ Policy string }
	awsCLI(t, ctx, &got, "lambda", "get-policy", "--function-name", fn)
	var doc struct{ Statement []map[string]any }
	if err := json.Unmarshal([]byte(got.Policy), &doc); err != nil {
		t.Fatalf("%s policy: %v", fn, err)
	}
	for _, st := range doc.Statement {
		cond := map[string]map[string]any{}
		if v, ok := st["FunctionUrlAuthType"]; ok {
			cond["StringEquals"] = map[string]any{"lambda:FunctionUrlAuthType": v}
			delete(st, "FunctionUrlAuthType")
		}
		if v, ok := st["InvokedViaFunctionUrl"]; ok {
			cond["Bool"] = map[string]any{"lambda:InvokedViaFunctionUrl": fmt.Sprint(v)}
			delete(st, "InvokedViaFunctionUrl")
		}
		if len(cond) > 0 {
			st["Condition"] = cond
		}
	}
	b, _ := json.Marshal(doc)
	pol, err := awspolicy.Parse(string(b))
	if err != nil {
		t.Fatalf("%s policy %s: %v", fn, got.Policy, err)
	}
	arn := fmt.Sprintf("arn:aws:lambda:us-east-1:123456789012:function:%s", fn)
	anyone := awspolicy.Principal{AWS: "arn:aws:iam::999999999999:user/anyone"}
	viaURL := map[string]string{"lambda:FunctionUrlAuthType": "NONE", "lambda:InvokedViaFunctionUrl": "true"}
	for _, action := range []string{"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"} {
		if d := pol.Evaluate(awspolicy.Request{Principal: anyone, Action: action, Resource: arn, Context: viaURL}); d != awspolicy.Allow {
			t.Errorf("%s through its function URL: %s %v (the URL answers 403)", fn, action, d)
		}
	}
	if pol.Allows(awspolicy.Request{Principal: anyone, Action: "lambda:InvokeFunction", Resource: arn, Context: map[string]string{}}) {
		t.Errorf("%s may be invoked directly by another account, past the basic auth: %s", fn, got.Policy)
	}
}

// checkScrapydURL runs the api function's function URL handler in-process as its main wires
// it (credentials from the secret its environment names, in the emulator): a request without
// credentials, or with wrong ones, is refused; with the secret's credentials it is served.
func checkScrapydURL(t *testing.T, ctx context.Context, getenv func(string) string, build func(user, pass string) http.Handler) {
	t.Helper()
	if getenv("CRAWLQ_SCRAPYD_SECRET_ARN") == "" {
		t.Fatal("the api function's environment names no Scrapyd secret (scrapyd_api=true)")
	}
	awsCfg := awstest.Config(t)
	src, err := envconfig.Scrapyd(envconfig.New(getenv))
	if err != nil {
		t.Fatal(err)
	}
	user, pass, err := scrapyd.Credentials(ctx, src, &awsCfg)
	if err != nil || user == "" || len(pass) < 20 {
		t.Fatalf("scrapyd credentials from the secret: user %q, password of %d chars, %v", user, len(pass), err)
	}
	h := scrapyd.LambdaHandler(scrapyd.FunctionURL{Handler: build(user, pass)}, func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, fmt.Errorf("not a function URL event")
	})
	call := func(auth string) int {
		ev := events.LambdaFunctionURLRequest{RawPath: "/daemonstatus.json", Headers: map[string]string{}}
		ev.RequestContext.HTTP.Method = "GET"
		ev.RequestContext.HTTP.SourceIP = "203.0.113.9"
		if auth != "" {
			ev.Headers["authorization"] = auth
		}
		payload, _ := json.Marshal(ev)
		out, err := h(ctx, payload)
		if err != nil {
			t.Fatalf("function URL handler: %v", err)
		}
		res, ok := out.(events.LambdaFunctionURLResponse)
		if !ok {
			t.Fatalf("function URL handler answered %T", out)
		}
		return res.StatusCode
	}
	basic := func(u, p string) string {
		r, _ := http.NewRequest("GET", "/", nil)
		r.SetBasicAuth(u, p)
		return r.Header.Get("Authorization")
	}
	if code := call(""); code != http.StatusUnauthorized {
		t.Errorf("function URL without credentials: %d, want 401", code)
	}
	if code := call(basic(user, pass+"x")); code != http.StatusUnauthorized {
		t.Errorf("function URL with a wrong password: %d, want 401", code)
	}
	if code := call(basic(user, pass)); code != http.StatusOK {
		t.Errorf("function URL with the secret's credentials: %d, want 200", code)
	}
}
