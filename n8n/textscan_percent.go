package n8n

// percentSpans finds credentials in URL-encoded text, as a form body or a
// query carries a JSON document or another form
// (payload=%7B%22password%22%3A%22…%22%7D, next=%2Fcb%3Ftoken%3D…): it
// decodes the %XX escapes, runs the structural pass on the decoded text
// (which decodes again, for text encoded twice, up to depth times), and
// hides the bytes of s that each span's decoded bytes came from.
func percentSpans(s string, spans []span, depth int) []span {
	if depth <= 0 {
		return spans
	}
	decoded, from, ok := percentDecode(s)
	if !ok {
		return spans
	}
	for _, sp := range structural(decoded, depth-1) {
		spans = append(spans, span{from[min(sp.start, len(decoded))], from[min(sp.end, len(decoded))]})
	}
	return spans
}

// percentDecode decodes every valid %XX escape of s. from[i] is the index
// in s of the byte that decoded byte i came from (from[len(decoded)] is
// len(s)). ok is false when s holds no escape.
func percentDecode(s string) (decoded string, from []int, ok bool) {
	first := -1
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '%' && hexDigit(s[i+1]) && hexDigit(s[i+2]) {
			first = i
			break
		}
	}
	if first < 0 {
		return "", nil, false
	}
	b := make([]byte, 0, len(s))
	from = make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		if s[i] == '%' && i+2 < len(s) && hexDigit(s[i+1]) && hexDigit(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			from = append(from, i)
			i += 3
			continue
		}
		b = append(b, s[i])
		from = append(from, i)
		i++
	}
	from = append(from, len(s))
	return string(b), from, true
}

func hexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
