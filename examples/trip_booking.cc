#include <stdexcept>

#include "examples/examples.h"

namespace sagad {

SagaDefinition TripBooking() {
  auto def = SagaBuilder("trip_booking", 1)
                 // Three independent bookings at once (roots of the graph).
                 .Step("reserve_flight")
                 .After()
                 .Call("airline", "POST", "/flights/holds",
                       {{"flight", "{{input.flight}}"}, {"passenger", "{{input.traveller}}"}})
                 .Compensate("airline", "POST", "/flights/holds/{{reserve_flight.ref}}/cancel")
                 .Step("reserve_hotel")
                 .After()
                 .Call("hotel", "POST", "/hotels/bookings",
                       {{"hotel", "{{input.hotel}}"},
                        {"nights", "{{input.nights}}"},
                        {"guest", "{{input.traveller}}"}})
                 .Compensate("hotel", "POST", "/hotels/bookings/{{reserve_hotel.ref}}/cancel")
                 .Step("reserve_car")
                 .After()
                 .Call("cars", "POST", "/cars/rentals",
                       {{"pickup", "{{input.pickup}}"},
                        {"days", "{{input.days}}"},
                        {"driver", "{{input.traveller}}"}})
                 .Compensate("cars", "POST", "/cars/rentals/{{reserve_car.ref}}/cancel")
                 // Pay only once all three are held.
                 .Step("charge_card")
                 .After("reserve_flight", "reserve_hotel", "reserve_car")
                 .Call("payments", "POST", "/charges",
                       {{"amount", "{{input.amount}}"},
                        {"currency", "{{input.currency}}"},
                        {"customer", "{{input.traveller}}"}})
                 .Compensate("payments", "POST", "/charges/{{charge_card.ref}}/refund")
                 // The pivot: tickets cannot be un-issued; an operator approves.
                 .Step("issue_tickets")
                 .Call("airline", "POST", "/flights/holds/{{reserve_flight.ref}}/issue",
                       {{"charge", "{{charge_card.ref}}"}})
                 .Irreversible()
                 .Step("send_itinerary")
                 .Call("mail", "POST", "/messages",
                       {{"to", "{{input.email}}"},
                        {"body",
                         "Flight {{reserve_flight.ref}}, hotel {{reserve_hotel.ref}}, "
                         "car {{reserve_car.ref}}"}})
                 .Compensate("mail", "POST", "/messages/{{send_itinerary.ref}}/recall")
                 .Build();
  if (!def.ok()) throw std::logic_error("trip_booking: " + def.status().ToString());
  return *def;
}

}  // namespace sagad
