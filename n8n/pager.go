package n8n

import (
	"crypto/sha256"
	"errors"
	"fmt"
)

const (
	// maxPages bounds one listing. n8n keeps at most 10,000 executions
	// by default (EXECUTIONS_DATA_MAX_COUNT): 40 pages of 250. 400 pages
	// are 100,000 executions or credentials, 20,000 workflows.
	maxPages = 400
	// maxListed bounds the bytes of all the pages of one listing: 4 MiB
	// pages of a listing that never ends add up fast; n8n's listings of
	// 100,000 executions are under 100 MiB.
	maxListed = 256 << 20
	// maxCursor bounds a cursor: n8n's are base64 of a small JSON object
	// (about 40 characters).
	maxCursor = 1 << 10
)

// ErrEndless is returned for a listing that does not end as n8n's do: a
// cursor seen before (n8n's cursors only move on), one no n8n gives, more
// pages or bytes than any n8n lists.
var ErrEndless = errors.New("n8n's listing does not end as n8n's do")

// pager follows a listing's nextCursor and stops it where no n8n's
// listing goes.
type pager struct {
	what  string // "GET /executions"
	pages int
	bytes int64
	seen  map[[sha256.Size]byte]bool
}

// next is called with each page's size and its nextCursor: it says
// whether to read the page at cursor, or why the listing stops.
func (p *pager) next(size int, cursor string) (bool, error) {
	p.pages++
	p.bytes += int64(size)
	if cursor == "" {
		return false, nil
	}
	stop := func(why string, args ...any) (bool, error) {
		return false, fail(stateEndless, fmt.Errorf("%w: %s: %s", ErrEndless, p.what, fmt.Sprintf(why, args...)))
	}
	switch {
	case len(cursor) > maxCursor:
		return stop("page %d gave a cursor of %d bytes; n8n's are about 40", p.pages, len(cursor))
	case p.pages >= maxPages:
		return stop("stopped after %d pages; n8n lists that many only past 100,000 items", p.pages)
	case p.bytes >= maxListed:
		return stop("stopped after %d MiB in %d pages", p.bytes>>20, p.pages)
	}
	if p.seen == nil {
		p.seen = map[[sha256.Size]byte]bool{}
	}
	h := sha256.Sum256([]byte(cursor))
	if p.seen[h] {
		return stop("page %d gave the cursor of an earlier page again: the listing would go round for ever", p.pages)
	}
	p.seen[h] = true
	return true, nil
}
