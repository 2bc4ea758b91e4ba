package audit

import (
	"errors"
)

// ErrOverloaded is why a request was shed: the queue was full, or it waited
// longer than Batching.Wait.
var ErrOverloaded = errors.New("the service is overloaded")
