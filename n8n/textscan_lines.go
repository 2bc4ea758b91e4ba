package n8n

import "strings"

// Values that are not on their name's line: YAML's and TOML's value on the
// next line (password:\n  s3cr3t), YAML's block scalars (token: |), an HTTP
// header folded onto the next line, and a multipart form field, whose value
// follows a blank line. Line breaks may be real or escaped (\n written out,
// as in a JSON document quoted into a message).

// lineBreakLen is the length of the line break at p: "\n", "\r\n", or the
// same escaped ("\\n", "\\r\\n"); 0 when there is none.
func lineBreakLen(s string, p int) int {
	for _, lb := range []string{"\r\n", "\n", `\r\n`, `\n`} {
		if strings.HasPrefix(s[p:], lb) {
			return len(lb)
		}
	}
	return 0
}

// lineIndent is the indentation of the line that holds byte i: the spaces
// and tabs after the last line break (real or escaped) before it, looked
// for in the 1 KiB before i (a longer line counts as not indented), so
// that a text of many names costs linear time.
func lineIndent(s string, i int) int {
	from := max(0, i-1024)
	start := from
	if nl := strings.LastIndexByte(s[from:i], '\n'); nl >= 0 {
		start = from + nl + 1
	}
	if esc := strings.LastIndex(s[start:i], `\n`); esc >= 0 {
		start += esc + 2
	}
	if start == from && from > 0 {
		return 0
	}
	n := 0
	for start+n < i && (s[start+n] == ' ' || s[start+n] == '\t') {
		n++
	}
	return n
}

// lineEnd is where the line from p ends: at a line break, or, in text with
// escaped breaks, at a backslash or a quote (the end of the string that
// holds the document).
func lineEnd(s string, p int, escaped bool) int {
	stops := "\r\n"
	if escaped {
		stops = "\r\n\\\""
	}
	for p < len(s) && !strings.ContainsRune(stops, rune(s[p])) {
		p++
	}
	return p
}

// nextLineValue finds a value at the start of the next line when the line
// ends at k, right after the name at nameAt and its separator: a scalar
// indented deeper than the name's line, or, after a block indicator (| or >, with
// its - or + and digit), every line indented deeper. A nested mapping
// ("  user: bob") or a list ("  - a") is no scalar: their names are read in
// their turn.
func nextLineValue(s string, k, nameAt int) (start, end int, ok bool) {
	p, block := k, false
	if p < len(s) && (s[p] == '|' || s[p] == '>') {
		block = true
		p++
		for p < len(s) && (s[p] == '-' || s[p] == '+' || s[p] >= '1' && s[p] <= '9') {
			p++
		}
		for p < len(s) && (s[p] == ' ' || s[p] == '\t') {
			p++
		}
	}
	if p >= len(s) {
		return 0, 0, false
	}
	lb := lineBreakLen(s, p)
	if lb == 0 {
		return 0, 0, false
	}
	escaped := s[p] == '\\'
	indent := lineIndent(s, nameAt)
	start, ok = deeperLine(s, p+lb, indent)
	if !ok {
		return 0, 0, false
	}
	end = lineEnd(s, start, escaped)
	if !block {
		switch line := s[start:end]; {
		case line[0] == '"' || line[0] == '\'':
			start, end = quotedValue(s, start)
			return start, end, true
		case line[0] == '-' && (len(line) == 1 || line[1] == ' '), mappingKey(line):
			return 0, 0, false
		}
		return start, len(strings.TrimRight(s[:end], " \t")), true
	}
	for {
		lb := lineBreakLen(s, end)
		if lb == 0 {
			break
		}
		next, ok := deeperLine(s, end+lb, indent)
		if !ok {
			break
		}
		end = lineEnd(s, next, escaped)
	}
	return start, len(strings.TrimRight(s[:end], " \t")), true
}

// deeperLine returns where the content of the line starting at p begins,
// when that line is indented more than indent and not blank.
func deeperLine(s string, p, indent int) (int, bool) {
	q := p
	for q < len(s) && (s[q] == ' ' || s[q] == '\t') {
		q++
	}
	if q-p <= indent || q >= len(s) || lineBreakLen(s, q) > 0 {
		return 0, false
	}
	return q, true
}

// mappingKey reports a line that starts a YAML mapping: a name, a colon,
// then a space or nothing.
func mappingKey(line string) bool {
	name, rest, ok := strings.Cut(line, ":")
	return ok && headerName.MatchString(strings.TrimSpace(name)) && (rest == "" || rest[0] == ' ' || rest[0] == '\t')
}

// bracedValue is the content of an ODBC-style braced value at k
// (PWD={p;w}), or (k, k) when the braces hold a document or never close.
func bracedValue(s string, k int) (int, int) {
	for end := k + 1; end < len(s) && end-k <= 256; end++ {
		switch s[end] {
		case '}':
			return k + 1, end
		case '"', ':', '{', '\n', '\r':
			return k, k
		}
	}
	return k, k
}

// multipartSpans hides the value of a multipart form field whose name is a
// credential's: Content-Disposition: form-data; name="api_key", a blank
// line, then the value, on its own line.
func multipartSpans(s string, spans []span) []span {
	for i := 0; ; {
		j := strings.Index(s[i:], "form-data;")
		if j < 0 {
			return spans
		}
		at := i + j + len("form-data;")
		i = at
		head := s[at:min(len(s), at+300)]
		n := strings.Index(head, "name=")
		if n < 0 {
			continue
		}
		name := strings.Trim(head[n+5:], `\"'`)
		name = name[:strings.IndexFunc(name+`"`, func(r rune) bool { return r == '"' || r == '\'' || r == '\\' || r == ';' })]
		if !SensitiveName(name) {
			continue
		}
		// The headers of the part (a Content-Type may follow) end at a
		// blank line; the value is the line after it.
		p, escaped := -1, false
		for _, blank := range []string{"\r\n\r\n", "\n\n", `\r\n\r\n`, `\n\n`} {
			if b := strings.Index(head[n:], blank); b >= 0 && (p < 0 || at+n+b < p) {
				p, escaped = at+n+b+len(blank), blank[0] == '\\'
			}
		}
		if p < 0 {
			continue
		}
		end := lineEnd(s, p, escaped)
		if end > p && !strings.HasPrefix(s[p:], Redacted) {
			spans = append(spans, span{p, end})
		}
		i = max(i, end)
	}
}
