package db

import (
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"
)

// The default exec mode sends every parameter in the text format (pgx does not describe the
// statement, so it cannot know a binary format the server would accept), and the queue's
// statements carry a page's discovered URLs, job ids and lease tokens as text[] and bigint[]
// arrays. pgx's text encoder for a slice goes through its generic array path: a boxed value, an
// element plan and a string conversion per element, the most allocations of any step of a
// crawled page. arrayCodec writes the same text literal for []string and []int64 in one pass,
// and leaves everything else (the binary format the caching exec modes pick, other element
// types, decoding) to pgx's own array codec.

// registerArrayEncoders puts arrayCodec in front of m's text[] and bigint[] codecs, and maps
// []string and []int64 to those types, as pgx's default map does, so a parameter of either Go
// type finds it when the statement's types are not known.
func registerArrayEncoders(m *pgtype.Map) {
	for _, a := range []struct {
		name  string
		value any
	}{{"_text", []string(nil)}, {"_int8", []int64(nil)}} {
		t, ok := m.TypeForName(a.name)
		if !ok {
			continue
		}
		ac, ok := t.Codec.(*pgtype.ArrayCodec)
		if !ok {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: arrayCodec{ac}})
		m.RegisterDefaultPgType(a.value, a.name)
	}
}

// arrayCodec is pgx's ArrayCodec with a one-pass text encoder for []string and []int64.
type arrayCodec struct {
	*pgtype.ArrayCodec
}

func (c arrayCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.TextFormatCode {
		switch value.(type) {
		case []string:
			return arrayText[string](appendArrayElement)
		case []int64:
			return arrayText[int64](appendInt)
		}
	}
	return c.ArrayCodec.PlanEncode(m, oid, format, value)
}

// arrayText writes a []T as an array literal, each element by the function; nil is NULL.
type arrayText[T any] func(buf []byte, elem T) []byte

func (appendElem arrayText[T]) Encode(value any, buf []byte) ([]byte, error) {
	v := value.([]T)
	if v == nil {
		return nil, nil
	}
	buf = append(buf, '{')
	for i, e := range v {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendElem(buf, e)
	}
	return append(buf, '}'), nil
}

func appendInt(buf []byte, n int64) []byte { return strconv.AppendInt(buf, n, 10) }

// appendArrayElement appends s as an element of an array literal: as it is, or double-quoted
// with backslash escapes where the array parser would otherwise read it differently (empty,
// NULL, white space, braces, the comma, quotes, backslashes).
func appendArrayElement(buf []byte, s string) []byte {
	if s != "" && !(len(s) == 4 && strings.EqualFold(s, "null")) && !strings.ContainsAny(s, " \t\n\r\v\f{},\"\\") {
		return append(buf, s...)
	}
	buf = append(buf, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			buf = append(buf, '\\')
		}
		buf = append(buf, s[i])
	}
	return append(buf, '"')
}
