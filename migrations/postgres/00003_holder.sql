-- One holder at a time: what the fences need.
--
-- executions.claimed_retry_of keeps a retry_of that a client sent and n8n
-- never confirmed; retry_of holds only lineage that n8n told the service
-- (its public API, or an Error Trigger payload), and only that grants a
-- claim or an outcome.
-- event_executions.acted says that the execution was told to process the
-- event at least once: an error of an execution that never was says
-- nothing about the outcome.
-- event_history.crm_ref keeps the CRM reference an outcome or a person gave,
-- so that evidence refused from a non-holder can be confirmed as it was.

-- +goose Up
ALTER TABLE executions ADD COLUMN claimed_retry_of text NOT NULL DEFAULT '';
ALTER TABLE event_executions ADD COLUMN acted boolean NOT NULL DEFAULT false;
ALTER TABLE event_history ADD COLUMN crm_ref text NOT NULL DEFAULT '';
-- Claims of old rows acted; their errors keep meaning what they meant.
UPDATE event_executions SET acted = true WHERE role = 'claim';

-- +goose Down
ALTER TABLE event_history DROP COLUMN crm_ref;
ALTER TABLE event_executions DROP COLUMN acted;
ALTER TABLE executions DROP COLUMN claimed_retry_of;
