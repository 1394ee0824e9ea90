// Package apiutil holds the few API calls several packages make the same
// way.
package apiutil
