#pragma once
/// \file
/// Offers one message to a list of handlers, the way an actor's behavior
/// would: the first whose parameter types match the message's elements is
/// called with them. For the step driver, whose waits look at messages
/// outside a CAF behavior (fiber_inbox.hpp). Not a caf::message_handler
/// built per wait: that allocates its match cases on every message the step
/// loop looks at.
#include <caf/all.hpp>

#include <type_traits>
#include <utility>

namespace asteroid::actors::detail {

namespace dispatch_impl {

/// Element `i` of `m` as a handler takes it: an atom constant stands for
/// the value matched already (the message holds a plain atom_value).
template <class T>
decltype(auto) element(caf::message& m, size_t i) {
  if constexpr (caf::is_atom_constant<T>::value)
    return T{};
  else
    return m.template get_mutable_as<T>(i);
}

template <class F, class... Ts, size_t... Is>
bool call_if_match(caf::message& m, F& f, caf::detail::type_list<Ts...>,
                   std::index_sequence<Is...>) {
  if (!m.template match_elements<std::decay_t<Ts>...>())
    return false;
  f(element<std::decay_t<Ts>>(m, Is)...);
  return true;
}

template <class F>
bool call_if_match(caf::message& m, F& f) {
  using args = typename caf::detail::get_callable_trait<F>::arg_types;
  return call_if_match(m, f, args{},
                       std::make_index_sequence<caf::detail::tl_size<args>::value>{});
}

} // namespace dispatch_impl

/// Calls the first of `handlers` that takes `m`'s elements (by reference,
/// so a handler may move them out). False when none does.
template <class... Fs>
bool dispatch(caf::message& m, Fs&&... handlers) {
  return (dispatch_impl::call_if_match(m, handlers) || ...);
}

} // namespace asteroid::actors::detail
