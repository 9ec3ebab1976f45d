// The reference sagas (docs/defining-sagas.md), declared with the builder DSL.
#pragma once

#include "sagas/definition.h"
#include "sagas/toolbox.h"

namespace sagad {

// incident_response v1: create_ticket, isolate_host, disable_account,
// notify_user (irreversible, waits for approval).
SagaDefinition IncidentResponse();
// order_fulfilment v1: reserve_inventory, charge_payment, create_shipment.
SagaDefinition OrderFulfilment();
// trip_booking v1: reserve_flight, reserve_hotel and reserve_car at once,
// then charge_card after all three, issue_tickets (irreversible, waits for
// approval), send_itinerary.
SagaDefinition TripBooking();
// soc_tools v1, a toolbox for an incident agent (docs/agents.md):
// create_ticket (undo close), block_ip (undo unblock), disable_account
// (undo enable), notify_user (irreversible: an operator approves each mail).
ToolboxDefinition SocTools();

}  // namespace sagad
