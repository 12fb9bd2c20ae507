// Package awspolicy evaluates AWS policy documents (IAM identity policies and the resource
// policies of SNS topics and KMS keys) for one request, so tests can check what a policy
// allows rather than what text it contains: moto and LocalStack enforce none of these
// policies, so an emulator apply proves nothing about them.
//
// It covers the subset crawlq's Terraform writes: Effect, Principal (Service, AWS, "*"),
// Action and Resource with the * and ? wildcards, and Condition with StringEquals,
// StringLike, ArnEquals, ArnLike and Bool (each optionally ...IfExists). Anything outside the
// subset (NotAction, NotResource, NotPrincipal, other operators) is a parse error, never a
// silent guess. No Go library in the module proxy evaluates policies (the ones there only
// model the JSON), hence this small one.
package awspolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupported is returned (wrapped, naming the element) for a policy outside the subset.
var ErrUnsupported = errors.New("awspolicy: unsupported policy element")

// Decision is the outcome of evaluating a request.
type Decision int

const (
	// ImplicitDeny: no statement allows the request.
	ImplicitDeny Decision = iota
	// Allow: a statement allows it and none denies it.
	Allow
	// ExplicitDeny: a Deny statement matches.
	ExplicitDeny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case ExplicitDeny:
		return "explicit deny"
	}
	return "implicit deny"
}

// Principal is who makes a request: an AWS service ("cloudwatch.amazonaws.com") or an IAM
// principal's ARN ("arn:aws:iam::123456789012:role/x").
type Principal struct {
	Service string
	AWS     string
}

// Request is one API call to evaluate.
type Request struct {
	// Principal is checked against statements that name one (resource policies); a statement
	// without Principal (an identity policy's) applies to any principal.
	Principal Principal
	// Action, e.g. "sns:Publish".
	Action string
	// Resource is the ARN acted on.
	Resource string
	// Context holds the request's condition keys, e.g. "aws:SourceArn". A missing key fails
	// every condition on it (except ...IfExists), as in AWS.
	Context map[string]string
}

// Policy is a parsed policy document.
type Policy struct {
	Statements []Statement
}

// Statement is one parsed statement.
type Statement struct {
	Sid        string
	Effect     string
	Principals map[string][]string // nil: no Principal element; "*" key: everyone
	Actions    []string
	Resources  []string
	Conditions []Condition
}

// Condition is one operator, key and its values (any value may match).
type Condition struct {
	Operator string
	Key      string
	Values   []string
}

var operators = map[string]bool{"StringEquals": true, "StringLike": true, "ArnEquals": true, "ArnLike": true, "Bool": true}

// Parse reads a policy document.
func Parse(doc string) (Policy, error) {
	var raw struct {
		Statement json.RawMessage
	}
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		return Policy{}, fmt.Errorf("awspolicy: parse: %w", err)
	}
	var stmts []map[string]json.RawMessage
	if err := json.Unmarshal(raw.Statement, &stmts); err != nil {
		var one map[string]json.RawMessage
		if err2 := json.Unmarshal(raw.Statement, &one); err2 != nil {
			return Policy{}, fmt.Errorf("awspolicy: parse Statement: %w", err)
		}
		stmts = []map[string]json.RawMessage{one}
	}
	var p Policy
	for i, m := range stmts {
		st, err := parseStatement(m)
		if err != nil {
			return Policy{}, fmt.Errorf("statement %d: %w", i, err)
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

func parseStatement(m map[string]json.RawMessage) (Statement, error) {
	var st Statement
	for k, v := range m {
		var err error
		switch k {
		case "Sid":
			err = json.Unmarshal(v, &st.Sid)
		case "Effect":
			err = json.Unmarshal(v, &st.Effect)
		case "Action":
			st.Actions, err = stringOrList(v)
		case "Resource":
			st.Resources, err = stringOrList(v)
		case "Principal":
			st.Principals, err = parsePrincipal(v)
		case "Condition":
			st.Conditions, err = parseConditions(v)
		default:
			return st, fmt.Errorf("%w: %s", ErrUnsupported, k)
		}
		if err != nil {
			return st, fmt.Errorf("%s: %w", k, err)
		}
	}
	if st.Effect != "Allow" && st.Effect != "Deny" {
		return st, fmt.Errorf("statement Effect %q: want Allow or Deny", st.Effect)
	}
	if len(st.Actions) == 0 || len(st.Resources) == 0 {
		return st, fmt.Errorf("%w: a statement without Action or Resource", ErrUnsupported)
	}
	return st, nil
}

func stringOrList(v json.RawMessage) ([]string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return []string{s}, nil
	}
	var l []string
	if err := json.Unmarshal(v, &l); err != nil {
		return nil, err
	}
	return l, nil
}

func parsePrincipal(v json.RawMessage) (map[string][]string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s != "*" {
			return nil, fmt.Errorf("principal %q: want \"*\" or an object", s)
		}
		return map[string][]string{"*": {"*"}}, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for k, raw := range m {
		if k != "Service" && k != "AWS" && k != "*" {
			return nil, fmt.Errorf("%w: principal type %s", ErrUnsupported, k)
		}
		l, err := stringOrList(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = l
	}
	return out, nil
}

func parseConditions(v json.RawMessage) ([]Condition, error) {
	var m map[string]map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	var out []Condition
	for op, keys := range m {
		if !operators[strings.TrimSuffix(op, "IfExists")] {
			return nil, fmt.Errorf("%w: condition operator %s", ErrUnsupported, op)
		}
		for k, raw := range keys {
			vals, err := stringOrList(raw)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", op, k, err)
			}
			out = append(out, Condition{Operator: op, Key: k, Values: vals})
		}
	}
	return out, nil
}

// Evaluate decides the request as AWS does within one policy: an explicit Deny wins over any
// Allow, and without a matching Allow the request is implicitly denied.
func (p Policy) Evaluate(r Request) Decision {
	d := ImplicitDeny
	for _, st := range p.Statements {
		if !st.matches(r) {
			continue
		}
		if st.Effect == "Deny" {
			return ExplicitDeny
		}
		d = Allow
	}
	return d
}

// Allows reports whether the policy allows the request.
func (p Policy) Allows(r Request) bool { return p.Evaluate(r) == Allow }

func (st Statement) matches(r Request) bool {
	if st.Principals != nil && !st.principalMatches(r.Principal) {
		return false
	}
	if !anyMatch(st.Actions, r.Action, true) || !anyMatch(st.Resources, r.Resource, false) {
		return false
	}
	for _, c := range st.Conditions {
		if !c.holds(r.Context) {
			return false
		}
	}
	return true
}

func (st Statement) principalMatches(p Principal) bool {
	if _, ok := st.Principals["*"]; ok {
		return true
	}
	if p.Service != "" && contains(st.Principals["Service"], p.Service) {
		return true
	}
	if p.AWS == "" {
		return false
	}
	for _, id := range st.Principals["AWS"] {
		if id == "*" || id == p.AWS {
			return true
		}
		// An account (its id or its root ARN) stands for every principal of that account.
		acct := id
		if parts := strings.SplitN(id, ":", 6); len(parts) == 6 && parts[2] == "iam" && parts[5] == "root" {
			acct = parts[4]
		}
		if parts := strings.SplitN(p.AWS, ":", 6); len(parts) == 6 && parts[4] == acct {
			return true
		}
	}
	return false
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// anyMatch: some pattern matches s; actions compare case-insensitively, as AWS does.
func anyMatch(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			p, s = strings.ToLower(p), strings.ToLower(s)
		}
		if glob(p, s) {
			return true
		}
	}
	return false
}

// glob matches AWS wildcards: * any run of characters (including none and "/"), ? one.
func glob(pattern, s string) bool {
	if pattern == "*" {
		return true
	}
	// By hand: path.Match's * stops at "/", which ARNs are full of.
	var m func(p, s string) bool
	m = func(p, s string) bool {
		for len(p) > 0 {
			switch p[0] {
			case '*':
				for len(p) > 0 && p[0] == '*' {
					p = p[1:]
				}
				if p == "" {
					return true
				}
				for i := 0; i <= len(s); i++ {
					if m(p, s[i:]) {
						return true
					}
				}
				return false
			case '?':
				if s == "" {
					return false
				}
				p, s = p[1:], s[1:]
			default:
				if s == "" || p[0] != s[0] {
					return false
				}
				p, s = p[1:], s[1:]
			}
		}
		return s == ""
	}
	return m(pattern, s)
}

// arnMatch compares ARNs part by part (the resource part may hold ":"), each part with
// wildcards: AWS documents ArnEquals and ArnLike as the same comparison.
func arnMatch(pattern, arn string) bool {
	pp, ap := strings.SplitN(pattern, ":", 6), strings.SplitN(arn, ":", 6)
	if len(pp) != 6 || len(ap) != 6 {
		return false
	}
	for i := range pp {
		if !glob(pp[i], ap[i]) {
			return false
		}
	}
	return true
}

func (c Condition) holds(ctx map[string]string) bool {
	op, ifExists := strings.CutSuffix(c.Operator, "IfExists")
	v, ok := ctx[c.Key]
	if !ok {
		return ifExists
	}
	for _, want := range c.Values {
		var hit bool
		switch op {
		case "StringEquals", "Bool":
			hit = v == want
		case "StringLike":
			hit = glob(want, v)
		case "ArnEquals", "ArnLike":
			hit = arnMatch(want, v)
		}
		if hit {
			return true
		}
	}
	return false
}
