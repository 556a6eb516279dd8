// The page: viewer/assets/report.html with its stylesheet, its script and the data (as embed-safe
// JSON, viewer/page_json.h) put in place. Nothing from the trace reaches the HTML except inside
// that JSON, which the script reads with JSON.parse and shows with textContent.
#ifndef GPUMEM_VIEWER_HTML_PAGE_H_
#define GPUMEM_VIEWER_HTML_PAGE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "viewer/page_data.h"

namespace gpumem::viewer {

// The whole page for `page`.
std::string RenderPage(const PageData& page);
// The template filled with `safe_json` (already EmbedSafeJson'd).
std::string RenderPageWithJson(absl::string_view safe_json);

// The template's parts as compiled in (for tests).
absl::string_view TemplateHtml();
absl::string_view TemplateCss();
absl::string_view TemplateJs();

}  // namespace gpumem::viewer

#endif  // GPUMEM_VIEWER_HTML_PAGE_H_
