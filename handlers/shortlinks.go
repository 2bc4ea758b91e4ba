package handlers

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/retryaudit/retryaudit/audit"
)

// shortLink redirects /e/{id} to the audit page of the event the outbox row
// {id} alerts about. Slack messages link it when the event's own path is too
// long for a button (Slack's limit is 3,000 characters; an event id of 500
// Unicode characters escapes to more). It needs sign-in like every page.
func (h *Handler) shortLink(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		h.pageError(c, http.StatusNotFound, "Not found", "There is no such alert.")
		return
	}
	k, err := h.store.OutboxEvent(c.Request.Context(), id)
	if err != nil {
		h.pageFail(c, err)
		return
	}
	pageHeaders(c)
	c.Redirect(http.StatusFound, audit.Links{}.Event(k.Source, k.EventID))
}
