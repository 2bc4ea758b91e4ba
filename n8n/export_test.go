package n8n

import "golang.org/x/crypto/bcrypt"

// The wiring tests hash the token dozens of times; bcrypt's cost is not
// what they test.
func init() { tokenCost = bcrypt.MinCost }
