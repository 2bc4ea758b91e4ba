package n8n

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// ErrRedirectRefused is returned for a redirect to another scheme, host or
// port, which is not followed.
var ErrRedirectRefused = errors.New("refused to follow a redirect to another address, so that the secret the request " +
	"carries is not sent there")

// maxRedirects is how many redirects within one origin are followed.
const maxRedirects = 5

// CheckRedirect is the redirect policy (http.Client.CheckRedirect) of
// every request that carries a secret: n8n's API key, retryaudit's token,
// or a body holding a token. Go drops only its standard auth headers when a
// redirect leaves the host, and re-sends a 307's or 308's body, so a
// redirect is followed only within the scheme, host and port the first
// request went to; any other is refused, and the error says where it
// pointed.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	from := via[0].URL
	if origin(req.URL) != origin(from) {
		return fmt.Errorf("%w: %s pointed to %s; set the address it answers at", ErrRedirectRefused,
			from.Redacted(), (&url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host, Path: req.URL.Path}).Redacted())
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("%s: stopped after %d redirects", from.Redacted(), maxRedirects)
	}
	return nil
}

// origin is scheme://host:port, with the scheme's default port written
// out and the host in lower case.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
