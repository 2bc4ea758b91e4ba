package audit

// ScratchSource is the source of the self-check's drill, and with
// ".other" appended its second source. Nothing else uses them, so their
// events can be deleted, and their alerts are never sent.
const ScratchSource = "retryaudit-check"
