package store

// queries holds the store's statements, each loaded by its field's name from
// the embedded .sql files, one a table: sql/ where both databases agree,
// the driver's own sql/ where they differ. A statement missing from the
// files, or one that no field names, stops Open: a broken catalogue fails at
// start, not at the first request.
type queries struct {
	// ledger.sql
	LedgerLock, LedgerWrite string
	// events.sql
	EventCount, EventCountInReview, EventCountInReviewByWorkflow, EventCountUniqueKeys  string
	EventDeleteScratch, EventFindDone, EventFindStale, EventList, EventPrune, EventRead string
	ItemList                                                                            string
	// executions.sql
	EventExecutionCount, EventExecutionList, EventExecutionReadTouched, ExecutionDeleteScratch string
	ExecutionPrune, ExecutionRead, ExecutionReadRetries                                        string
	// history.sql
	HistoryCount, HistoryReadLastSettlement, HistoryReadPage, HistoryReadRefusedReports string
	HistoryReadReviewQueue                                                              string
	// errors.sql
	ErrorBatchInsert, ErrorCount, ErrorCountOfEvent, ErrorDeleteScratch, ErrorDropPayloads       string
	ErrorFindUnlinked, ErrorKnown, ErrorList, ErrorListOfEvent, ErrorListOfExecution, ErrorMerge string
	ErrorPrune, ErrorPruneOfEvent, ErrorRead, ErrorRelinkOfEvent                                 string
	// groups.sql
	GroupErrors, GroupJoin, GroupPrune, GroupRead, GroupSpaceReplies string
	// outbox.sql
	ChannelClaimSlot, ChannelPause, ChannelReadSlot, OutboxCount, OutboxCountAlertsByKind              string
	OutboxCountHeldBack, OutboxCountThreadMessages, OutboxDeleteScratch, OutboxFinish, OutboxLease     string
	OutboxPendingInThread, OutboxPruneOfErrors, OutboxPruneOfEvent, OutboxQueueAgain, OutboxReadAlerts string
	OutboxReadEvent, OutboxReadOldestPending, OutboxReadRootRow, OutboxRefreshWaits, OutboxRelease     string
	OutboxRenewLease, OutboxWaitingAlerts, OutboxWrite, ThreadPruneOfErrors, ThreadPruneOfEvent        string
	ThreadPruneOfGroups, ThreadReadRoot, ThreadSave                                                    string
	// stats.sql
	OverviewByWorkflow, OverviewDays, OverviewHours, OverviewInReview, OverviewSnapshot, ResolutionRead string
	StatsAdd, StatsDeleteFoldedHours, StatsDeleteMergedShards, StatsFoldHours                           string
	StatsForgetOldDays, StatsMergeShards, StatsReadOldHours                                             string
	// service.sql
	LeaseRelease, LeaseTake, StateChanged, StateCreateSecret, StateRead, StateWrite string
	// redaction.sql
	RedactReadAlertGroups, RedactReadEventHistory, RedactReadExecutions, RedactReadN8nErrors string
	RedactReadOutbox, RedactWriteAlertGroups, RedactWriteEventHistory, RedactWriteExecutions string
	RedactWriteN8nErrors, RedactWriteOutbox                                                  string
}
