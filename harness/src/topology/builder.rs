//! The one shape of a topology builder's option setters, `fn option(mut self, value) -> Self`,
//! written once so that each builder lists its options as documented fields.

/// Inside a builder's `impl` block, generates for each `field: Type` (with its doc comment) a
/// by-value setter `pub fn field(mut self, field: Type) -> Self` that stores the value as is.
/// A setter that adjusts its value (a lower bound, say) is written by hand beside it.
macro_rules! setters {
    ($($(#[$doc:meta])* $field:ident: $ty:ty),+ $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $field(mut self, $field: $ty) -> Self {
                self.$field = $field;
                self
            }
        )+
    };
}

pub(crate) use setters;
