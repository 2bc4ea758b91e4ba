package handlers

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// ctxUser is the context key of the signed-in person's name.
const ctxUser = "retryaudit.user"

// UIConfig configures who may read the pages.
type UIConfig struct{}

type pages struct{}

func newPages(cfg Config) (*pages, error) { return &pages{}, nil }

func (h *Handler) registerPages(r gin.IRouter) {}

func (h *Handler) pageError(c *gin.Context, code int, title, message string) {
	c.String(code, title+": "+message)
}

var _ = http.StatusOK
