/* sgfit-private.h: what the files of tools/sgfit share. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

/* (transfer full) The JSON of @path under the rules of every reader
 * (textio.h), or NULL with @error (SG_FIT_ERROR_RUN) naming @what and
 * @path. */
cJSON *sg_fit_read_json (const char *path, const char *what, GError **error);
