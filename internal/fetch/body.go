package fetch

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// countingReader counts bytes read off the wire, before decompression.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readBody reads the body, decompressing gzip or deflate, and fails with
// ErrBodyTooLarge as soon as the decoded size passes max: the cap applies after
// decompression so a small compressed bomb cannot expand without bound.
func readBody(resp *http.Response, max int64) (body []byte, wire int64, err error) {
	cr := &countingReader{r: resp.Body}
	var r io.Reader = cr
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(cr)
		if err != nil {
			if err == io.EOF {
				// An empty gzip body (common on 204/304-like answers) is just empty.
				return nil, cr.n, nil
			}
			return nil, cr.n, fmt.Errorf("open gzip body: %w", err)
		}
		defer zr.Close()
		r = zr
	case "deflate":
		dr, err := newDeflateReader(cr)
		if err != nil {
			return nil, cr.n, err
		}
		defer dr.Close()
		r = dr
	default:
		return nil, 0, fmt.Errorf("decode body: %w %q", ErrContentEncoding, enc)
	}

	size := 512
	if resp.ContentLength > 0 && resp.Header.Get("Content-Encoding") == "" {
		size = int(resp.ContentLength) + 1 // +1 lets ReadFrom see EOF without growing
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	n, err := buf.ReadFrom(io.LimitReader(r, max+1))
	if n > max {
		return nil, cr.n, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, max)
	}
	if err != nil {
		return nil, cr.n, fmt.Errorf("read body: %w", err)
	}
	return buf.Bytes(), cr.n, nil
}

// newDeflateReader handles both meanings of "deflate" seen in the wild: the zlib
// stream RFC 9110 specifies and the raw DEFLATE stream many servers send instead.
func newDeflateReader(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReader(r)
	hdr, err := br.Peek(2)
	if err != nil {
		if err == io.EOF {
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, fmt.Errorf("open deflate body: %w", err)
	}
	if hdr[0]&0x0f == 8 && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 {
		zr, err := zlib.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("open deflate body: %w", err)
		}
		return zr, nil
	}
	return flate.NewReader(br), nil
}

// textTypes are the non-text/* media types whose bodies we convert to UTF-8.
var textTypes = map[string]bool{
	"application/xhtml+xml":  true,
	"application/xml":        true,
	"application/json":       true,
	"application/javascript": true,
	"application/ld+json":    true,
	"application/rss+xml":    true,
	"application/atom+xml":   true,
}

func isText(mediaType string) bool {
	return strings.HasPrefix(mediaType, "text/") || textTypes[mediaType] ||
		strings.HasSuffix(mediaType, "+xml") || strings.HasSuffix(mediaType, "+json")
}

// decodeText returns the media type and, for textual types, the body in valid
// UTF-8. The charset comes from a BOM, the Content-Type header, or an HTML meta
// tag; failing those, a body that is valid UTF-8 is taken as UTF-8 and anything
// else as windows-1252 (the WHATWG default), which decodes every byte.
func decodeText(body []byte, contentType string) (string, []byte) {
	if isHTMLUTF8(contentType) && !hasUTF16BOM(body) {
		// What the general path below decides for the most common header, without its
		// allocations (the media type's parameter map, the charset lookup).
		if !utf8.Valid(body) {
			body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
		}
		return "text/html", bytes.TrimPrefix(body, utf8BOM)
	}
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil || !strings.Contains(mediaType, "/") {
		// DetectContentType claims charset=utf-8 for any HTML; keep only its media
		// type so the charset is still worked out from the body.
		mediaType, _, _ = mime.ParseMediaType(http.DetectContentType(body))
		contentType = mediaType
	}
	mediaType = strings.ToLower(mediaType)
	if !isText(mediaType) || len(body) == 0 {
		return mediaType, body
	}

	enc, name, certain := charset.DetermineEncoding(body, contentType)
	if !certain && name == "windows-1252" && utf8.Valid(body) {
		// DetermineEncoding only looks at the first 1024 bytes; a page that is
		// ASCII there and UTF-8 later is UTF-8, not windows-1252.
		enc, name = encoding.Nop, "utf-8"
	}
	if name == "utf-8" || enc == encoding.Nop {
		if !utf8.Valid(body) {
			body = bytes.ToValidUTF8(body, []byte("\uFFFD"))
		}
		return mediaType, bytes.TrimPrefix(body, utf8BOM)
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil || !utf8.Valid(out) {
		// Decoders replace what they cannot map; this is the belt to that brace.
		out = bytes.ToValidUTF8(body, []byte("\uFFFD"))
	}
	// UTF-16 decoders keep the byte order mark; it is not content.
	return mediaType, bytes.TrimPrefix(out, utf8BOM)
}

var utf8BOM = []byte("\xef\xbb\xbf")

// isHTMLUTF8 reports whether contentType is the usual spelling of UTF-8 HTML.
func isHTMLUTF8(contentType string) bool {
	return strings.EqualFold(contentType, "text/html; charset=utf-8") || strings.EqualFold(contentType, "text/html;charset=utf-8")
}

// hasUTF16BOM reports a UTF-16 byte order mark, which outranks the header's charset.
func hasUTF16BOM(body []byte) bool {
	return len(body) >= 2 && (body[0] == 0xfe && body[1] == 0xff || body[0] == 0xff && body[1] == 0xfe)
}
