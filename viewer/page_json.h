// The page's data model (viewer/page_data.h) as JSON, and JSON made safe to embed in an HTML
// <script> element. The key names are read by viewer/assets/report.js (its `loadData`).
#ifndef GPUMEM_VIEWER_PAGE_JSON_H_
#define GPUMEM_VIEWER_PAGE_JSON_H_

#include <string>

#include "absl/strings/string_view.h"
#include "viewer/page_data.h"

namespace gpumem::viewer {

// One JSON object, every string through report::JsonString. Safe to embed (EmbedSafeJson).
std::string PageJson(const PageData& page);

// `json` with every `<`, `>` and `&` written as \u003c, \u003e, \u0026, and U+2028 / U+2029 as
// \u2028 / \u2029: still the same JSON value, but it can neither end the <script> element that
// holds it (`</script>`), open a comment (`<!--`), nor break a JavaScript string. These characters
// occur only inside JSON strings, where the escapes mean the same.
std::string EmbedSafeJson(absl::string_view json);

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_PAGE_JSON_H_
