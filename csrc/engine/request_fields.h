// The fields of a request and of its questions that a caller may leave out, each named once, in the addon's
// spelling: the addon reads them from a request object (addon/js_values.cpp), tq_cli from its calls file
// (cli/main.cpp). The token lists and the images, whose forms differ (typed arrays and pixel buffers there, JSON
// lists and raw RGB files here), each reads its own way.
#pragma once

#include "engine/engine.h"

namespace tq {

template <class Visit>
void for_each_request_field(AnswerRequest& r, Visit&& visit) {
  visit("wantHidden", r.want_hidden);
  visit("cacheSalt", r.cache_salt);
}

template <class Visit>
void for_each_question_field(QuestionTokens& q, Visit&& visit) {
  visit("readoutIndex", q.readout_index);
  visit("temperature", q.temperature);
}

}  // namespace tq
