package scrapyd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// LambdaHandler serves the API from a Lambda function URL: a function URL event (payload
// format 2.0: rawPath and requestContext.http) goes through h; any other payload goes to next
// (the api function's own JSON actions), so one function serves both.
func LambdaHandler(f FunctionURL, next func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, payload json.RawMessage) (any, error) {
		var probe struct {
			RawPath        string `json:"rawPath"`
			RequestContext *struct {
				HTTP *struct {
					Method string `json:"method"`
				} `json:"http"`
			} `json:"requestContext"`
		}
		if json.Unmarshal(payload, &probe) != nil || probe.RawPath == "" || probe.RequestContext == nil || probe.RequestContext.HTTP == nil {
			return next(ctx, payload)
		}
		var ev events.LambdaFunctionURLRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode function URL event: %w", err)
		}
		return f.Serve(ctx, ev)
	}
}

// FunctionURL serves the HTTP API behind a Lambda function URL, whose answers Lambda buffers
// and bounds (6 MB).
type FunctionURL struct {
	Handler http.Handler
	// Spill, when set, keeps an answer larger than a function URL holds (a long run's log or
	// items) and the client is redirected to it (302 to a short-lived link). Default none:
	// such an answer is a 413 that says where else to read it.
	Spill Spill
}

// Spill keeps an answer too large for a function URL where the client can fetch it.
type Spill interface {
	// Keep stores what write writes and returns a URL that serves it, with contentType, to
	// anyone holding the URL for a short while.
	Keep(ctx context.Context, contentType string, write func(io.Writer) error) (string, error)
}

// ServeFunctionURL runs one function URL request through h, without a Spill.
func ServeFunctionURL(ctx context.Context, h http.Handler, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	return FunctionURL{Handler: h}.Serve(ctx, ev)
}

// Serve runs one function URL request through f.Handler.
func (f FunctionURL) Serve(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	h := f.Handler
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return events.LambdaFunctionURLResponse{StatusCode: http.StatusBadRequest, Body: `{"status":"error","message":"bad base64 body"}`}, nil
		}
		body = b
	}
	req := requestOf(ctx, ev, body)
	rec := &capRecorder{ResponseRecorder: httptest.NewRecorder(), limit: MaxFunctionURLAnswer}
	aborted := serve(h, rec, req)
	if rec.over && f.Spill != nil && !aborted {
		return f.spill(ctx, ev, rec, body)
	}
	if aborted {
		// The handler gave up mid-answer (http.ErrAbortHandler: a read failed after the status
		// was written). A server would cut the connection; here the client gets an error
		// rather than the part that was written, which would look whole.
		b, _ := json.Marshal(map[string]string{"status": "error", "message": "the answer to " + clip(ev.RawPath) + " failed midway; see the function's log"})
		return events.LambdaFunctionURLResponse{StatusCode: http.StatusBadGateway, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b)}, nil
	}
	tooLarge := func() (events.LambdaFunctionURLResponse, error) {
		// Lambda would refuse the answer with an error of its own; the client gets this one,
		// which says what to do instead, and so does the function's log.
		msg := fmt.Sprintf("the answer to %s is larger than a Lambda function URL answer holds (%d bytes); read run logs with `crawlq logs RUN` and items from the items bucket",
			clip(ev.RawPath), MaxFunctionURLAnswer)
		slog.ErrorContext(ctx, "scrapyd: function URL answer too large", "path", clip(ev.RawPath), "limit", MaxFunctionURLAnswer)
		b, _ := json.Marshal(map[string]string{"status": "error", "message": msg})
		return events.LambdaFunctionURLResponse{StatusCode: http.StatusRequestEntityTooLarge, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b)}, nil
	}
	if rec.over {
		return tooLarge()
	}
	res := events.LambdaFunctionURLResponse{StatusCode: rec.Code, Headers: map[string]string{}}
	for k, v := range rec.Header() {
		res.Headers[k] = strings.Join(v, ", ")
	}
	ct := rec.Header().Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, "text/") || strings.HasPrefix(ct, "application/x-ndjson") {
		res.Body = rec.Body.String()
	} else {
		res.Body, res.IsBase64Encoded = base64.StdEncoding.EncodeToString(rec.Body.Bytes()), true
	}
	if enc, err := json.Marshal(res); err != nil || len(enc) > MaxFunctionURLAnswer {
		return tooLarge()
	}
	return res, nil
}

// requestOf is the http.Request of a function URL event.
func requestOf(ctx context.Context, ev events.LambdaFunctionURLRequest, body []byte) *http.Request {
	target := ev.RawPath
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	req := httptest.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, target, bytes.NewReader(body))
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	for _, c := range ev.Cookies {
		req.Header.Add("Cookie", c)
	}
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP + ":0"
	return req
}

// spill serves the request again into f.Spill and redirects the client there. The request
// runs twice (the first answer was given up at the bound, not kept), so only reads are spilled.
func (f FunctionURL) spill(ctx context.Context, ev events.LambdaFunctionURLRequest, first *capRecorder, body []byte) (events.LambdaFunctionURLResponse, error) {
	method := ev.RequestContext.HTTP.Method
	fail := func(status int, msg string, err error) (events.LambdaFunctionURLResponse, error) {
		slog.ErrorContext(ctx, "scrapyd: spill a large answer", "path", clip(ev.RawPath), "err", err)
		b, _ := json.Marshal(map[string]string{"status": "error", "message": msg})
		return events.LambdaFunctionURLResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b)}, nil
	}
	if method != http.MethodGet || first.Code != http.StatusOK {
		return fail(http.StatusRequestEntityTooLarge, fmt.Sprintf("the answer to %s %s is larger than a function URL answer holds (%d bytes)", method, clip(ev.RawPath), MaxFunctionURLAnswer), errAnswerTooLarge)
	}
	ct := first.Header().Get("Content-Type")
	link, err := f.Spill.Keep(ctx, ct, func(w io.Writer) error {
		sw := &spillWriter{w: w, header: http.Header{}}
		if serve(f.Handler, sw, requestOf(ctx, ev, body)) {
			return errors.New("the answer failed midway")
		}
		if sw.err != nil {
			return sw.err
		}
		if sw.code != 0 && sw.code != http.StatusOK {
			return fmt.Errorf("the second reading answered %d", sw.code)
		}
		return nil
	})
	if err != nil {
		return fail(http.StatusBadGateway, "the answer to "+clip(ev.RawPath)+" is larger than a function URL answer holds and keeping it for a redirect failed; see the function's log", err)
	}
	slog.InfoContext(ctx, "scrapyd: large answer redirected to a short-lived link", "path", clip(ev.RawPath))
	return events.LambdaFunctionURLResponse{StatusCode: http.StatusFound, Headers: map[string]string{"Location": link, "Cache-Control": "no-store"}}, nil
}

// spillWriter is the ResponseWriter of a spilled answer: the body goes to w.
type spillWriter struct {
	w      io.Writer
	header http.Header
	code   int
	err    error
}

func (s *spillWriter) Header() http.Header { return s.header }
func (s *spillWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}
func (s *spillWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	n, err := s.w.Write(b)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// serve runs h, reporting whether it aborted with http.ErrAbortHandler (other panics go on).
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(w, r)
	return false
}

// MaxFunctionURLAnswer bounds an answer through the function URL: Lambda's 6 MB response
// payload, the encoded response (JSON-escaped or base64 body, headers) included.
const MaxFunctionURLAnswer = 6_000_000

// capRecorder records an answer up to limit bytes; past it, it keeps nothing more and fails the
// handler's writes, so a large log or item list stops being read instead of filling memory.
type capRecorder struct {
	*httptest.ResponseRecorder
	limit int
	over  bool
}

func (c *capRecorder) Write(b []byte) (int, error) {
	if c.over || c.Body.Len()+len(b) > c.limit {
		c.over = true
		return 0, errAnswerTooLarge
	}
	return c.ResponseRecorder.Write(b)
}

// WriteString is Write's, so io.WriteString (and a strings.Reader copied in) meets the same
// bound instead of the embedded recorder's unbounded WriteString.
func (c *capRecorder) WriteString(s string) (int, error) { return c.Write([]byte(s)) }

var errAnswerTooLarge = errors.New("answer larger than a function URL answer holds")

// CredentialSource says where the basic auth credentials come from: a Secrets Manager secret
// holding {"username":...,"password":...} (SecretARN, CRAWLQ_SCRAPYD_SECRET_ARN), else Username
// and Password (CRAWLQ_SCRAPYD_USERNAME, CRAWLQ_SCRAPYD_PASSWORD). None: no auth.
type CredentialSource struct {
	SecretARN          string
	Username, Password string
}

// Credentials reads the basic auth credentials src names ("", "" for none).
func Credentials(ctx context.Context, src CredentialSource, awsCfg *aws.Config) (user, pass string, err error) {
	if arn := src.SecretARN; arn != "" {
		if awsCfg == nil {
			return "", "", fmt.Errorf("read scrapyd credentials: secret %s: there is no AWS config", arn)
		}
		out, err := secretsmanager.NewFromConfig(*awsCfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return "", "", fmt.Errorf("read scrapyd credentials: %w", err)
		}
		var c struct{ Username, Password string }
		if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &c); err != nil || c.Username == "" || c.Password == "" {
			return "", "", fmt.Errorf("read scrapyd credentials: secret %s must be {\"username\":...,\"password\":...}", arn)
		}
		return c.Username, c.Password, nil
	}
	if (src.Username == "") != (src.Password == "") {
		return "", "", errors.New("scrapyd credentials: a username without a password, or a password without a username")
	}
	return src.Username, src.Password, nil
}

// Unavailable answers every request with 503 and Scrapyd's error shape: what the api function
// serves on its function URL when it has no credentials, rather than an open API.
func Unavailable(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(map[string]string{"status": "error", "message": msg})
	})
}
