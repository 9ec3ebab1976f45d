#include <stdexcept>

#include "examples/examples.h"

namespace sagad {

SagaDefinition OrderFulfilment() {
  auto def = SagaBuilder("order_fulfilment", 1)
                 .SearchAttributes({"customer", "sku"})
                 .Step("reserve_inventory")
                 .Call("inventory", "POST", "/reservations",
                       {{"sku", "{{input.sku}}"}, {"qty", "{{input.qty}}"}})
                 .Compensate("inventory", "POST", "/reservations/{{reserve_inventory.ref}}/release")
                 .Step("charge_payment")
                 .Call("payments", "POST", "/charges",
                       {{"amount", "{{input.amount}}"},
                        {"currency", "{{input.currency}}"},
                        {"customer", "{{input.customer}}"}})
                 .Compensate("payments", "POST", "/charges/{{charge_payment.ref}}/refund")
                 .Step("create_shipment")
                 .Call("shipping", "POST", "/shipments", {{"address", "{{input.address}}"}})
                 .Compensate("shipping", "POST", "/shipments/{{create_shipment.ref}}/cancel")
                 .Build();
  if (!def.ok()) throw std::logic_error("order_fulfilment: " + def.status().ToString());
  return *def;
}

}  // namespace sagad
