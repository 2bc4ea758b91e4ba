package audit

// Redactor hides the credentials that text from n8n can carry. The store
// passes every such text it keeps through one, whoever built the record (an
// Error Trigger payload, reconciliation, a claim's names), so that no caller
// can store a credential by forgetting. The rules live beside the n8n
// payloads they know: package n8n's Redactor is the one the service uses.
type Redactor interface {
	// RedactText replaces the credentials it recognises in free text;
	// applied twice it changes nothing more.
	RedactText(s string) string
	// Redact returns a document decoded from JSON that n8n sent with its
	// credentials replaced, by its structure and then its strings. It does
	// not modify v.
	Redact(v any) any
	// Version names the rules: RedactStored passes what was stored before
	// through them once per version.
	Version() string
}
