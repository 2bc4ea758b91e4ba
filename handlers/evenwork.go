package handlers

import (
	"golang.org/x/crypto/bcrypt"
)

// evenWork makes a password check cost the same whatever the name: a name
// nobody has, a user whose hash has the highest cost of all, or one whose
// hash is cheaper. bcrypt's work doubles with each step of cost, so a check
// against a hash of cost c is topped up with checks against throwaway hashes
// of costs c, c+1, …, top-1: 2^c + (2^c + … + 2^(top-1)) = 2^top, the work
// of one check at the top cost, which is what an unknown name costs. The
// time of a refusal then tells nothing of whether the name exists or how
// its hash was made; no clock is read and nothing sleeps, so a loaded
// machine slows every check alike.
type evenWork struct {
	top int
	// pads holds a throwaway hash of each cost from the lowest of the
	// users' to top; pads[top] stands in for an unknown name.
	pads map[int][]byte
}

func newEvenWork(users map[string][]byte) evenWork {
	low, top := bcrypt.MaxCost, bcrypt.MinCost
	for _, h := range users {
		if c, err := bcrypt.Cost(h); err == nil {
			low, top = min(low, c), max(top, c)
		}
	}
	low = min(low, top)
	w := evenWork{top: top, pads: map[int][]byte{}}
	for c := low; c <= top; c++ {
		w.pads[c], _ = bcrypt.GenerateFromPassword([]byte("retryaudit: no such user"), c)
	}
	return w
}

// compare reports whether pass matches hash (nil for a name nobody has),
// at the bcrypt work of one check at the top cost.
func (w evenWork) compare(hash []byte, pass string) bool {
	c, err := bcrypt.Cost(hash)
	if hash == nil || err != nil || w.pads[c] == nil {
		bcrypt.CompareHashAndPassword(w.pads[w.top], []byte(pass))
		return false
	}
	ok := bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
	for pad := c; pad < w.top; pad++ {
		bcrypt.CompareHashAndPassword(w.pads[pad], []byte(pass))
	}
	return ok
}
