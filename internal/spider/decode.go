package spider

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// typeErrors are yaml.v3's type errors of a spec, named by field path.
type typeErrors struct {
	errs []FieldError
	// validate is false when the spec is half decoded (a mapping with a key given twice is
	// not decoded at all, or an error could not be located): its validation errors would be
	// false, so only errs are reported.
	validate bool
	scopes   []string // the fields a bad value left unset: validation errors inside them are false
}

// nameTypeErrors names yaml.v3's type errors (bad values, keys given twice, unknown fields),
// each with a line and a Go type, by field path (decodeProblems). Unknown fields and bad values
// leave the rest decoded, so the spec is validated too, except where a bad value left a field
// unset.
func nameTypeErrors(te *yaml.TypeError, data []byte) typeErrors {
	out := typeErrors{validate: true}
	probs := decodeProblems(data)
	type lineKind struct {
		line int
		kind problemKind
	}
	named := map[lineKind]bool{}
	for _, m := range te.Errors {
		sm := yamlLineRE.FindStringSubmatch(m)
		if sm == nil {
			out.errs = append(out.errs, FieldError{Msg: m})
			out.validate = false
			continue
		}
		line, _ := strconv.Atoi(sm[1])
		kind := typeErrorKind(sm[2])
		if kind == duplicateKey {
			out.validate = false
		}
		lk := lineKind{line, kind}
		if named[lk] {
			continue // an earlier message of the line named them all
		}
		for _, p := range probs {
			if p.line == line && p.kind == kind {
				out.errs = append(out.errs, p.fe)
				if kind == badValue {
					out.scopes = append(out.scopes, p.scope)
				}
				named[lk] = true
			}
		}
		if named[lk] {
			continue
		}
		out.errs = append(out.errs, FieldError{Path: "line " + sm[1], Msg: sm[2]})
		if kind != unknownField {
			out.validate = false // not located: what it left unset is unknown
		}
	}
	return out
}

// typeErrorKind tells which problem a yaml.v3 type error message (its line cut off) is.
func typeErrorKind(msg string) problemKind {
	switch {
	case strings.HasPrefix(msg, "mapping key "):
		return duplicateKey
	case strings.Contains(msg, " not found in type "):
		return unknownField
	}
	return badValue
}

// A decodeProblem is a value that does not fit its field of Spec, a key given twice or a key
// Spec does not have, named by field path where yaml.v3 names only a line and a Go type.
type decodeProblem struct {
	line int
	kind problemKind
	fe   FieldError
	// scope is the path yaml.v3 left undecoded or zero: a value that is not set (a map entry
	// or list element dropped, a field left zero), so validation errors under it are false.
	scope string
}

// problemKind tells which of yaml.v3's messages a decodeProblem names.
type problemKind int

const (
	badValue     problemKind = iota // "cannot unmarshal ..."
	duplicateKey                    // "mapping key ... already defined"
	unknownField                    // "field ... not found in type ..."
)

// decodeProblems walks the first document of data beside the Spec type. It is only called
// when yaml.v3 reported type errors, to name them; aliases are not followed.
func decodeProblems(data []byte) []decodeProblem {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	var out []decodeProblem
	walkDecode(doc.Content[0], reflect.TypeOf(Spec{}), "", "", &out)
	return out
}

// walkDecode checks node n against type t at path; scope is what is lost if n does not fit.
func walkDecode(n *yaml.Node, t reflect.Type, path, scope string, out *[]decodeProblem) {
	if n.Kind == yaml.AliasNode || n.ShortTag() == "!!null" {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func() {
		*out = append(*out, decodeProblem{line: n.Line, scope: scope,
			fe: FieldError{Path: path, Msg: fmt.Sprintf("want %s, got %s (line %d)", wantName(t), gotName(n, t), n.Line)}})
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			bad()
			return
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag != "" && tag != "-" {
				fields[tag] = f.Type
			}
		}
		checkDupKeys(n, path, out)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			p := joinPath(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				*out = append(*out, decodeProblem{line: k.Line, kind: unknownField,
					fe: FieldError{Path: joinPath(path, truncate(k.Value)), Msg: fmt.Sprintf("unknown field (line %d)%s", k.Line, didYouMean(k.Value, fields))}})
				continue
			}
			walkDecode(n.Content[i+1], ft, p, p, out) // a bad field is left zero
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			bad()
			return
		}
		for i, c := range n.Content {
			// A bad element is dropped and the later ones move up: the whole list is suspect.
			walkDecode(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), path, out)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			bad()
			return
		}
		checkDupKeys(n, path, out)
		// A bad value leaves its key out of the map: checks of the struct holding the map
		// (an items rule's key among its fields) are suspect too.
		owner := path
		if i := strings.LastIndexAny(path, ".["); i > 0 {
			owner = path[:i]
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkDecode(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value), owner, out)
		}
	default:
		if n.Kind != yaml.ScalarNode {
			bad()
			return
		}
		if err := n.Decode(reflect.New(t).Interface()); err != nil {
			bad()
		}
	}
}

// checkDupKeys names every key of mapping n given more than once.
func checkDupKeys(n *yaml.Node, path string, out *[]decodeProblem) {
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if line, ok := first[k.Value]; ok {
			*out = append(*out, decodeProblem{line: k.Line, kind: duplicateKey,
				fe: FieldError{Path: joinPath(path, truncate(k.Value)), Msg: fmt.Sprintf("given twice (line %d, first at line %d)", k.Line, line)}})
			continue
		}
		first[k.Value] = k.Line
	}
}

func wantName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	default:
		return "a mapping"
	}
}

func gotName(n *yaml.Node, t reflect.Type) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	got := truncate(n.Value)
	if n.ShortTag() == "!!str" {
		got = strconv.Quote(got)
	}
	if wantName(t) == "an integer" {
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil && f == math.Trunc(f) && !math.IsInf(f, 0) {
			got += ", out of range"
		}
	}
	return got
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// inScope reports whether path is scope or inside it ("" holds every path).
func inScope(path, scope string) bool {
	return scope == "" || path == scope || strings.HasPrefix(path, scope+".") || strings.HasPrefix(path, scope+"[")
}

// yamlParserProblems are the messages of yaml.v3's parser (not its scanner): for these it
// prints the 0-based line of the construct it was parsing ("line 3" for the flow list that
// opens on line 4), and no line at all for line 1.
var yamlParserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %TAG directive":         true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxProblem words a YAML syntax error with the 1-based line yaml.v3's scanner errors
// already carry and its parser errors do not.
func syntaxProblem(err error) FieldError {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, problem := 0, msg
	if sm := yamlLineRE.FindStringSubmatch(msg); sm != nil {
		line, _ = strconv.Atoi(sm[1])
		problem = sm[2]
	}
	if !yamlParserProblems[problem] {
		return FieldError{Msg: "parse: " + msg}
	}
	return FieldError{Msg: fmt.Sprintf("parse: line %d: %s", line+1, problem)}
}
